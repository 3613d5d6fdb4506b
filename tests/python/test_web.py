"""The server's web page in headless Chromium (Debian's chromium and chromedriver, driven by
selenium; no browser is downloaded): it loads, lists the datasets, draws the histograms and
the quick look, runs a query whose count equals NumPy's, previews rows, and a screenshot is
kept as a test artifact."""

from __future__ import annotations

import os
import shutil

import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, ROOT, needs_data, start_server

pytestmark = needs_data
ERSST = "ersst_v3b_1960-2016_concat.nc"
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def page_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("web")
    strata.import_file(DATA / ERSST, root / "ersst", layout="V-S", bins=8)
    strata.import_file(DATA / "pop.nc", root / "pop")
    proc, base = start_server(root, root.parent / "web-server.log")
    yield base
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, "Debian's chromium and chromium-driver are installed by make setup"
    os.environ["SE_OFFLINE"] = "true"  # selenium must not fetch a browser or a driver
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        opts.add_argument(a)
    # Chromium keeps its profile and its single-instance socket under TMPDIR, and a socket
    # directory outlives `quit()`: both go under the test's own temporary directory.
    tmp = tmp_path_factory.mktemp("chromium")
    opts.add_argument(f"--user-data-dir={tmp / 'profile'}")
    service = Service(driver_path, env={**os.environ, "TMPDIR": str(tmp)})
    driver = webdriver.Chrome(service=service, options=opts)
    yield driver
    driver.quit()


def test_web_page_runs_a_query(page_server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 30)
    browser.get(f"{page_server}/#ersst")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg[data-variable='sst']")))
    assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav a")] == ["ersst", "pop"]
    # The address names the dataset: a link shows it, Back shows the one before.
    browser.find_element(By.CSS_SELECTOR, "nav a[data-name='pop']").click()
    wait.until(lambda d: d.find_element(By.ID, "title").text == "pop")
    browser.back()
    wait.until(lambda d: d.find_element(By.ID, "title").text == "ersst")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "svg[data-variable='sst']")))
    wait.until(
        lambda d: d.execute_script(
            "const i = document.getElementById('quicklook'); return i.complete && i.naturalWidth"
        )
    )
    assert browser.execute_script("return document.getElementById('quicklook').naturalWidth") >= 480

    browser.find_element(By.ID, "where").send_keys("sst > 28")
    browser.find_element(By.ID, "isel").send_keys("time=0:12")
    browser.find_element(By.ID, "run").click()
    count = wait.until(ec.presence_of_element_located((By.ID, "count-value")))
    with netCDF4.Dataset(DATA / ERSST) as nc:
        sst = nc["sst"][:12].filled(np.nan)
    assert int(count.text) == int(np.count_nonzero(sst > 28))
    table = wait.until(ec.presence_of_element_located((By.ID, "preview-table")))
    rows = table.find_elements(By.TAG_NAME, "tr")
    assert len(rows) == 21 and [c.text for c in rows[0].find_elements(By.TAG_NAME, "th")] == [
        "time",
        "lat",
        "lon",
        "sst",
    ]
    assert all(float(r.find_elements(By.TAG_NAME, "td")[3].text) > 28 for r in rows[1:])
    assert "output=points" in browser.find_element(By.ID, "download").get_attribute("href")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "web_page.png"))

    browser.find_element(By.ID, "where").clear()
    browser.find_element(By.ID, "where").send_keys("sst >")
    browser.find_element(By.ID, "run").click()
    wait.until(lambda d: d.find_element(By.ID, "error").text)


def test_dap_html_form_builds_a_constraint(page_server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{page_server}/dap/ersst.html")
    browser.find_element(By.CSS_SELECTOR, "input[data-var='sst']").click()
    for dim, value in (("time", "3:1:3"), ("lat", "40:1:41"), ("lon", "0:2:8")):
        box = browser.find_element(By.CSS_SELECTOR, f"tr:first-child input[data-dim='{dim}']")
        box.clear()
        box.send_keys(value)
    browser.find_element(By.ID, "ascii").click()
    WebDriverWait(browser, 30).until(lambda d: "sst[1][2][5]" in d.find_element(By.TAG_NAME, "body").text)
    rows = [r for r in browser.find_element(By.TAG_NAME, "body").text.splitlines() if r.startswith("[0][")]
    got = np.array([[float(x) for x in r.split(", ")[1:]] for r in rows], dtype=np.float32)
    with netCDF4.Dataset(DATA / ERSST) as nc:
        nc.set_auto_mask(False)
        np.testing.assert_array_equal(got, nc["sst"][3, 40:42, 0:9:2])
