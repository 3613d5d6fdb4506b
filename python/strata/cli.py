"""The ``strata`` command line."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time

from . import __version__
from ._text import human_bytes as _human
from ._text import human_rate
from .errors import InvalidArgumentError, StrataError


def _attr_repr(v) -> str:
    import numpy as np

    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return ", ".join(json.dumps(s) for s in v)
    arr = np.atleast_1d(v)
    suffix = {"f4": "f", "i1": "b", "u1": "ub", "i2": "s", "u2": "us", "u4": "u", "i8": "ll", "u8": "ull"}
    s = suffix.get(arr.dtype.str[1:], "")
    names = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
    return ", ".join(f"{names.get(str(x), x)}{s}" for x in arr.tolist())


def cmd_import(args) -> int:
    from .importer import import_file, preview_import

    options = dict(
        codec=args.codec,
        objective=args.objective,
        error_bound=args.error_bound,
        layout=args.layout,
        byte_groups=args.byte_groups,
        bins=args.bins,
        binning=args.binning,
        chunks=args.chunks,
        subchunks=args.subchunks,
        shape_rule=args.shape_rule,
        record_dim=args.record_dim,
        slab_records=args.slab_records,
    )
    if args.dry_run:
        for p in preview_import(args.source, **options):
            print(f"{p.name} ({p.dtype}, {_shape_text(p.shape)})")
            for line in _stored_lines(p, "would store"):
                print(f"  {line}")
        return 0
    if args.store is None:
        raise InvalidArgumentError("give the store to create (or --dry-run to see the plans only)")
    report = import_file(args.source, args.store, progress=not args.quiet, **options)
    _print_report(report, "imported")
    return 0


def cmd_index(args) -> int:
    from .in_place import index_file

    r = index_file(
        args.source,
        args.index,
        record_dim=args.record_dim,
        bins=args.bins,
        binning=args.binning,
        progress=not args.quiet,
    )
    print(f"indexed {r.source} in place -> {r.index} (version {r.version})")
    print(
        f"  {r.variables} variables, {r.chunks} chunks, {r.bytes_read / 1e6:.1f} MB read "
        f"({r.raw_bytes / 1e6:.1f} MB of values) in {r.seconds:.2f} s; the index takes {r.index_bytes / 1e3:.1f} kB"
    )
    return 0


def cmd_export(args) -> int:
    from .export import export_file

    r = export_file(
        args.store,
        args.out,
        version=args.at,
        zlib=not args.no_compression,
        complevel=args.complevel,
        overwrite=args.force,
        progress=not args.quiet,
    )
    print(f"exported {r.store} (version {r.version}) -> {r.out}: {r.variables} variables, {r.raw_bytes / 1e6:.1f} MB")
    for w in r.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def cmd_append(args) -> int:
    from .importer import append_file

    report = append_file(
        args.source,
        args.store,
        recheck=not args.keep_codecs,
        objective=args.objective,
        allow_unordered=args.allow_unordered,
        progress=not args.quiet,
    )
    _print_report(report, "appended")
    return 0


def _print_report(report, verb: str) -> None:
    stored = sum(r["stored_bytes"] for r in report.variables)
    raw = sum(r["raw_bytes"] for r in report.variables)
    print(f"{verb} {report.source} -> {report.store} (version {report.version})")
    records = "" if report.records is None else f"{report.records} records, "
    print(f"  {records}{_human(report.raw_bytes)} in {report.seconds:.2f} s ({report.mb_per_s:.1f} MB/s)")
    print(f"  {'variable':<24} {'shape':<18} {'chunk':<16} {'sub-chunk':<14} {'codec':<24} {'ratio':>7}")
    for r in report.variables:
        ratio = f"{r['raw_bytes'] / r['stored_bytes']:.2f}" if r["stored_bytes"] else "-"
        chunks = "inline" if r["chunks"] is None else "x".join(map(str, r["chunks"])) or "-"
        subs = _shape_text(r["subchunks"])
        shape = "x".join(map(str, r["shape"])) or "scalar"
        print(f"  {r['name']:<24} {shape:<18} {chunks:<16} {subs:<14} {r['codec']:<24} {ratio:>7}")
    if stored:
        print(f"  total: {_human(raw)} raw -> {_human(stored)} stored, ratio {raw / stored:.2f}")


def cmd_info(args) -> int:
    from .dataset import open as open_store

    ds = open_store(args.store, args.version)
    schema = ds.schema
    stats = ds.stats()
    print(f"store {args.store} {{  // version {ds.version}, format v{schema.format_version}, layout {schema.layout}")
    print("dimensions:")
    for name, size in ds.dims.items():
        tag = " // record dimension" if name == ds.record_dim else ""
        size_text = f"UNLIMITED ; // ({size} currently)" if name in ds.unlimited_dims else f"{size} ;"
        print(f"\t{name} = {size_text}{tag}")
    print("variables:")
    for name, var in ds.variables.items():
        dims = f"({', '.join(var.dims)})" if var.dims else ""  # a scalar, as ncdump writes it
        print(f"\t{var.dtype_name} {name}{dims} ;")
        for k, v in var.attrs.items():
            print(f"\t\t{name}:{k} = {_attr_repr(v)} ;")
    if ds.attrs:
        print("\n// global attributes:")
        for k, v in ds.attrs.items():
            print(f"\t\t:{k} = {_attr_repr(v)} ;")
    print("}")
    print("\nstorage (values from the index alone):")
    rows = []
    total_raw = total_stored = 0
    for name, var in ds.variables.items():
        s = stats.get(name, {"raw_bytes": 0, "stored_bytes": 0, "count": 0, "min": None, "max": None})
        total_raw += s["raw_bytes"]
        total_stored += s["stored_bytes"]
        chain = var.chains[-1] if var.chains else "inline"
        if len(var.chains) > 1:
            chain += f" (+{len(var.chains) - 1} earlier)"
        rows.append(
            (
                name,
                _shape_text(var.chunks),
                _shape_text(var.subchunks),
                chain,
                _human(s["raw_bytes"]),
                _human(s["stored_bytes"]),
                f"{s['raw_bytes'] / s['stored_bytes']:.2f}" if s["stored_bytes"] else "-",
                str(s.get("count", 0)),
                f"{s['min']:.6g}" if s.get("min") is not None else "-",
                f"{s['max']:.6g}" if s.get("max") is not None else "-",
            )
        )
    # Columns as wide as their longest entry: names and chains vary from 1 to 40 characters.
    header = ("variable", "chunk", "sub-chunk", "codec", "raw", "stored", "ratio", "valid", "min", "max")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        left = " ".join(f"{v:<{w}}" for v, w in zip(r[:4], widths[:4], strict=True))
        right = " ".join(f"{v:>{w}}" for v, w in zip(r[4:], widths[4:], strict=True))
        print(f"  {left} {right}")
    ratio = f"{total_raw / total_stored:.2f}" if total_stored else "-"
    print(
        f"  total: {_human(total_raw)} raw, {_human(total_stored)} in segments, "
        f"{_human(schema.file_bytes)} in {schema.files} files, ratio {ratio}"
    )
    return 0


def _parse_range(text: str, flag: str):
    name, sep, rng = text.partition("=")
    if not sep or not name:
        raise InvalidArgumentError(f"{flag} expects DIM=RANGE, got '{text}'")
    return name.strip(), rng.strip()


def _index_slice(rng: str, flag: str):
    parts = rng.split(":")
    try:
        if len(parts) == 1:
            return int(parts[0])
        if len(parts) > 3:
            raise ValueError
        vals = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise InvalidArgumentError(f"{flag} range '{rng}' must be INDEX or START:STOP[:STEP]") from None
    if len(vals) == 3 and vals[2] is not None and vals[2] < 1:
        raise InvalidArgumentError(f"{flag} range '{rng}': the step must be a positive integer")
    return slice(*vals)


def _number(text: str) -> float | None:
    """A --sel bound of a range of an auxiliary coordinate (2-D latitude): a number, or
    None when empty."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidArgumentError(f"'{text}' is not a number") from None


def cmd_query(args) -> int:
    import numpy as np

    from .dataset import open as open_store

    ds = open_store(args.store, args.version)
    if args.where is None and (args.output is not None or args.variables is not None):
        raise InvalidArgumentError("--output and --variables go with --where")
    var = ds[args.variable]
    if args.precision is not None or args.max_rel_error is not None:
        var = var.at_precision(args.precision, max_rel_error=args.max_rel_error)
        if var.level is not None:
            print(f"precision level {var.level}: worst relative error {var.max_rel_error:.3g}", file=sys.stderr)
    positions, by_aux = _positions(args, ds, var)
    if args.where is not None:
        return _value_query(args, ds, var, positions, by_aux)
    if by_aux:
        # An area of a curvilinear grid or a mesh is no box: its points are a value query's
        # answer, and the constraint that keeps every valid value is the one to suggest.
        raise InvalidArgumentError(
            f"--sel on {', '.join(by_aux)} (an auxiliary coordinate of '{var.name}', not one of its dimensions "
            f"{', '.join(var.dims)}) selects the area's points through a mask: it goes with --where, "
            f"e.g. --where '{var.name} > -inf' for every valid value"
        )
    data = var.isel(**positions)
    kept_dims = [d for d in var.dims if not isinstance(positions.get(d), int)]
    if args.file:
        _write_output(args.file, ds, var, positions, kept_dims, data)
        print(f"wrote {var.name}{tuple(data.shape)} {data.dtype} to {args.file}")
        return 0
    print(f"{var.name}({', '.join(kept_dims)}) shape={tuple(data.shape)} dtype={data.dtype}")
    with np.printoptions(threshold=args.max_print, edgeitems=3):
        print(data)
    return 0


def _positions(args, ds, var) -> tuple[dict, dict]:
    """--isel and --sel as positions per dimension, and the --sel ranges of auxiliary
    coordinates (2-D lat/lon: variables spanning dimensions of ``var``) as (lo, hi)."""
    positions: dict = {}
    by_aux: dict = {}
    for item in args.isel or []:
        dim, rng = _parse_range(item, "--isel")
        positions[dim] = _index_slice(rng, "--isel")
    from ._area import is_auxiliary
    from ._coords import as_positions

    for item in args.sel or []:
        dim, rng = _parse_range(item, "--sel")
        if is_auxiliary(ds, var.dims, dim):
            lo, colon, hi = rng.partition(":")
            if not colon:
                raise InvalidArgumentError(f"--sel {dim}: '{dim}' is not a dimension; give a range LO:HI")
            by_aux[dim] = (_number(lo), _number(hi))
            continue
        if dim not in var.dims:
            raise InvalidArgumentError(f"'{var.name}' has no dimension '{dim}' (dims: {var.dims})")
        if dim in positions:
            raise InvalidArgumentError(f"dimension '{dim}' is given more than once")
        # The engine splits LO:HI (not at the colons of a time of day) and picks the positions.
        positions[dim] = as_positions(ds.label_index(dim).select_text(rng, getattr(args, "method", None)))
    return positions, by_aux


def _stream_points(args, ds, dims: tuple[str, ...], query: dict) -> int:
    """Writes a points/positions result to .csv or .parquet one piece at a time (bounded
    memory whatever the result's size)."""
    output = query["output"]
    if not args.file.endswith((".csv", ".parquet")):
        raise InvalidArgumentError(f"output '{args.file}' must end in .csv or .parquet for {output}")
    rows, parquet, t0 = 0, None, time.perf_counter()
    try:
        for piece in ds.query_batches(args.where, **query):
            frame = _frame(dims, piece, output)
            if args.file.endswith(".csv"):
                frame.to_csv(args.file, mode="a" if rows else "w", header=not rows, index=False)
            else:
                import pyarrow as pa
                import pyarrow.parquet as pq

                table = pa.Table.from_pandas(frame, preserve_index=False)
                if parquet is None:
                    parquet = pq.ParquetWriter(args.file, table.schema)
                parquet.write_table(table)
            rows += len(frame)
    finally:
        if parquet is not None:
            parquet.close()
    print(f"wrote {rows} rows to {args.file} ({(time.perf_counter() - t0) * 1e3:.1f} ms)")
    return 0


def _frame(dims: tuple[str, ...], result, output: str):
    """A points result as it is, positions as a table with a column per dimension."""
    import pandas as pd

    return pd.DataFrame(dict(zip(dims, result, strict=True))) if output == "positions" else result


def _value_query(args, ds, var, positions, by_aux) -> int:
    import numpy as np

    output = args.output or "dense"
    names = [n.strip() for n in args.variables.split(",")] if args.variables else [var.name]
    # A single index keeps its dimension here: value queries return whole-dimension results.
    isel = {d: slice(p, p + 1) if isinstance(p, int) else p for d, p in positions.items()}
    query = dict(
        isel=isel,
        sel=by_aux or None,
        variables=names,
        output=output,
        precision=args.precision,
        max_rel_error=args.max_rel_error,
        method=args.plan,
    )
    from .query import _constraint

    # The constraint's first variable gives the dimensions of positions (checked as the
    # query would check it).
    _, constrained = _constraint(ds, args.where, args.plan)
    dims = ds[constrained[0]].dims
    if args.file and output in ("points", "positions"):
        return _stream_points(args, ds, dims, query)
    if output != "count":
        # A points or dense result is built with pandas (its labels, its frame): imported
        # before the clock, whose figure is the query's (0.3 s of importing showed as a
        # 0.28 s query on a 56,000-element field).
        import pandas  # noqa: F401
    t0 = time.perf_counter()
    result, stats = ds.query(args.where, with_stats=True, **query)
    elapsed = time.perf_counter() - t0
    print(
        f"{stats['subchunks']} sub-chunks by {'+'.join(stats['methods']) or 'index'}: {stats['full']} segments "
        f"answered from the index, {stats['empty']} skipped, {stats['boundary']} read, {stats['scanned']} "
        f"scanned ({elapsed * 1e3:.1f} ms)",
        file=sys.stderr,
    )
    if output == "count":
        print(result)
        return 0
    if output in ("points", "positions"):
        # (Written to a file, these streamed above.)
        import pandas as pd  # only to print a table (a count needs none)

        result = _frame(dims, result, output)
        print(f"{len(result)} points")
        with pd.option_context("display.max_rows", args.max_print):
            print(result.to_string(max_rows=args.max_print))
        return 0
    if args.file:
        if not args.file.endswith(".npy"):
            raise InvalidArgumentError(f"output '{args.file}' must end in .npy for dense value queries")
        np.save(args.file, np.ma.filled(result, 0) if np.ma.isMaskedArray(result) else result)
        print(f"wrote {names[0]}{tuple(result.shape)} {result.dtype} to {args.file}")
        return 0
    print(f"{names[0]}({', '.join(var.dims)}) shape={tuple(result.shape)} dtype={result.dtype}")
    with np.printoptions(threshold=args.max_print, edgeitems=3):
        print(result)
    return 0


def _write_output(path: str, ds, var, positions, kept_dims, data) -> None:
    import numpy as np

    if path.endswith(".npy"):
        np.save(path, data)
        return
    if not path.endswith(".nc"):
        raise InvalidArgumentError(f"output '{path}' must end in .nc or .npy")
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as out:
        for k, v in ds.attrs.items():
            out.setncattr(k, v)
        for d, n in zip(kept_dims, data.shape, strict=True):
            out.createDimension(d, n)
        for d in kept_dims:
            coord = ds.coords.get(d)
            if coord is None or d == var.name:
                continue
            values = coord.isel(**{d: positions.get(d, slice(None))})
            _nc_var(out, d, (d,), values, coord.attrs)
        _nc_var(out, var.name, tuple(kept_dims), data, var.attrs)


def _nc_var(out, name, dims, values, attrs) -> None:
    fill = attrs.get("_FillValue")
    v = out.createVariable(name, values.dtype, dims, zlib=True, fill_value=fill)
    v.set_auto_maskandscale(False)
    for k, a in attrs.items():
        if k != "_FillValue":
            v.setncattr(k, a)
    v[...] = values


def cmd_sql(args) -> int:
    from .sql import SqlSession

    session = SqlSession(args.store, table=args.table, method=args.plan)
    if args.tables:
        for name, cols in session.tables.items():
            print(f"{name}: {', '.join(cols)}")
        return 0
    if args.query is None:
        raise InvalidArgumentError("give a query (or --tables to list the tables)")
    t0 = time.perf_counter()
    reader = session.stream(args.query)
    if args.file:
        rows = _write_batches(reader, args.file)
        print(f"wrote {rows} rows to {args.file} ({time.perf_counter() - t0:.2f} s)", file=sys.stderr)
        return 0
    import pyarrow as pa

    shown, rows = [], 0
    for batch in reader:
        if rows < args.max_print:
            shown.append(batch.slice(0, args.max_print - rows))
        rows += batch.num_rows
    table = pa.Table.from_batches(shown, schema=reader.schema)
    if table.column_names == ["plan_type", "plan"]:
        # EXPLAIN's plans are indented trees: printed as lines, not as cells of a frame.
        for kind, plan in zip(*table.to_pydict().values(), strict=True):
            print(f"{kind}:\n" + "\n".join("  " + line for line in str(plan).splitlines()))
        return 0
    import pandas as pd

    with pd.option_context("display.max_rows", args.max_print, "display.width", 200):
        print(table.to_pandas().to_string(max_rows=args.max_print))
    more = f", first {args.max_print} shown" if rows > args.max_print else ""
    print(f"{rows} rows{more} ({time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    return 0


def _write_batches(reader, path: str) -> int:
    """Streams a RecordBatchReader to CSV, Parquet or Arrow IPC, batch by batch."""
    import pyarrow as pa

    rows = 0
    if path.endswith(".csv"):
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(path, reader.schema) as w:
            for b in reader:
                w.write_batch(b)
                rows += b.num_rows
    elif path.endswith(".parquet"):
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, reader.schema) as w:
            for b in reader:
                w.write_batch(b)
                rows += b.num_rows
    elif path.endswith((".arrow", ".feather", ".ipc")):
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, reader.schema) as w:
            for b in reader:
                w.write_batch(b)
                rows += b.num_rows
    else:
        raise InvalidArgumentError(f"output '{path}' must end in .csv, .parquet or .arrow")
    return rows


def cmd_explain(args) -> int:
    from . import _core
    from .dataset import open as open_store
    from .query import _constraint, _region, session

    ds = open_store(args.store, args.version, cache_bytes=0)
    constraint, names = _constraint(ds, args.where, args.plan)
    driver = ds[names[0]]
    positions, by_aux = _positions(args, ds, driver)
    isel = {d: slice(p, p + 1) if isinstance(p, int) else p for d, p in positions.items()}
    starts, stops, steps, selected = _region(ds, driver.dims, driver.shape, isel, by_aux)
    outputs = (
        []
        if args.output in ("count", "positions")
        else ([n.strip() for n in args.variables.split(",")] if args.variables else names)
    )
    engine = session()
    kind = "points" if outputs else args.output
    query = _core.Query(
        constraint, starts, stops, steps, area=selected, output=kind, variables=outputs, method=args.plan
    )
    p = engine.plan(ds._reader, query)
    print(f"query: {constraint}  region: {list(zip(starts, stops, steps, strict=True))}  output: {args.output}")
    print(f"cost model: {engine.source}")
    print(p)
    if args.no_run:
        return 0
    _, stats = ds.query(
        constraint,
        isel=isel,
        sel=by_aux or None,
        variables=outputs or None,
        output=args.output,
        with_stats=True,
        method=args.plan,
    )
    print(stats["explain"].splitlines()[-1])
    return 0


def cmd_calibrate(args) -> int:
    from .planner import calibrate

    fit = calibrate(quick=args.quick, repeats=args.repeats, progress=not args.quiet)
    print(f"wrote {fit.path}: {fit.source}")
    print(f"  {'ns per unit':>11} {'index':>10} {'scan':>10}")
    for (k, v), (_, scan) in zip(fit.ns, fit.scan_ns, strict=True):
        print(f"  {k:>11} {v:10.4f} {scan:10.4f}")
    print(
        f"fit: median relative error {fit.median_relative_error:.1%}; the model picks the faster method "
        f"within 10% on {fit.picks_within_10pct:.0%} of the {fit.timings // 2} queries timed "
        f"(worst: {fit.worst_pick_slowdown:.2f}x the faster)"
    )
    return 0


def cmd_analyze(args) -> int:
    from .analyze import analyze
    from .dataset import is_store

    results = analyze(args.source, args.variables or None, samples=args.samples, error_bound=args.error_bound)
    for r in results:
        print(f"\n{r.name} ({r.dtype}), sample {_human(r.sample_bytes)}, netCDF4's zlib 4 + shuffle {r.reference:.3f}")
        print(f"  {'':<32} {'':>7} {'declared MB/s':>15} {'measured MB/s':>15}")
        print(f"  {'chain':<32} {'ratio':>7} {'encode':>7} {'decode':>7} {'encode':>7} {'decode':>7}  chosen for")
        nan = float("nan")
        for s in sorted(r.scores, key=lambda s: -s.ratio):
            chosen = ", ".join(o for o, c in r.choice.items() if c == s.chain)
            enc, dec = s.measured_encode_mb_s, s.measured_decode_mb_s
            print(
                f"  {s.chain:<32} {s.ratio:>7.3f} {s.encode_mb_s:>7.0f} {s.decode_mb_s:>7.0f} "
                f"{nan if enc is None else enc:>7.0f} {nan if dec is None else dec:>7.0f}  {chosen}"
            )
        if r.stored is not None:
            for line in _stored_lines(r.stored, "stored" if is_store(args.source) else "import stores"):
                print(f"  {line}")
    return 0


def _shape_text(shape) -> str:
    return "x".join(str(n) for n in shape) if shape else "-"


def _ratios_text(ratios: dict) -> str:
    return ", ".join(f"{c} {r:.3f}" for c, r in ratios.items())


def _stored_lines(p, verb: str) -> list[str]:
    """What the import stores for a variable (or a store holds), with its plan's looks."""
    lines = [f"{verb}: {p.chain or 'inline'}, blocks {_shape_text(p.subchunks)} of chunks {_shape_text(p.chunks)}"]
    plan = p.plan
    if not plan:
        lines[0] += " (no plan: under 16 KiB, or a chain given)"
        return lines
    lines[0] += f" ({plan['objective']}, first look on {_human(plan['sample_bytes'])})"
    if plan.get("reference"):
        lines[0] += f"; zlib 4 + shuffle there {plan['reference']:.3f}"
    if plan.get("previous"):
        lines.append(f"  replaced {plan['previous']} on later data ({plan.get('gain')}x better)")
    if unit := plan.get("unit"):
        where = "whole" if unit["stored_whole"] else "in blocks"
        lines.append(
            f"  whole: {_ratios_text(unit['whole'])}; in blocks: {_ratios_text(unit['blocks'])} -> stored {where}"
        )
    if shape := plan.get("shape"):
        kept = _shape_text(shape["shape"]) if shape["stored_other"] else "the first look's"
        lines.append(
            f"  blocks {_shape_text(shape['shape'])}: {_ratios_text(shape['other'])}; the first look's: "
            f"{_ratios_text(shape['ranked'])} -> {kept} blocks"
        )
    if refined := plan.get("refined"):
        lines.append(f"  on a larger sample ({_human(refined['sample_bytes'])}): {_ratios_text(refined['ratio'])}")
    return lines


def cmd_verify(args) -> int:
    from . import _core
    from .dataset import check_version

    check_version(args.version)
    version, files, size, segments, problems = _core.verify(args.store, args.version, args.deep)
    for file, slab, variable, segment, what in problems:
        where = ", ".join(
            p
            for p in (
                f"slab {slab}" if slab is not None else None,
                f"variable '{variable}'" if variable else None,
                segment,
            )
            if p
        )
        print(f"DAMAGED {file}{f' ({where})' if where else ''}: {what}")
    state = "clean" if not problems else f"{len(problems)} problem(s)"
    print(
        f"version {version}: {files} files, {_human(size)}, {segments} segments checked"
        f"{' and decoded' if args.deep else ''}: {state}"
    )
    return 0 if not problems else 1


def cmd_gc(args) -> int:
    from . import _core

    versions, removed, young = _core.gc(args.store, args.grace, args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for path, size in removed:
        print(f"{verb} {path} ({_human(size)})")
    print(
        f"{versions} versions kept; {verb} {len(removed)} files ({_human(sum(s for _, s in removed))}); "
        f"{len(young)} unnamed files younger than {args.grace:g} s left for their writers"
    )
    return 0


def cmd_serve(args) -> int:
    from . import _core

    _core.serve(
        args.dir,
        host=args.host,
        port=args.port,
        max_requests=args.max_requests,
        max_seconds=args.max_seconds,
        quiet=args.quiet,
        config=args.config,
    )
    return 0


def cmd_fetch(args) -> int:
    from . import remote

    ds = remote.open(args.url, token=args.token)
    isel: dict = {}
    for item in args.isel or []:
        dim, rng = _parse_range(item, "--isel")
        isel[dim] = _index_slice(rng, "--isel")
    # --sel text goes to the server as written: its engine splits LO:HI and picks positions.
    sel = dict(_parse_range(item, "--sel") for item in args.sel or [])
    variables = [v for v in args.vars.split(",") if v] if args.vars else None
    link = None if args.link is None else args.link * 1e6
    if link is not None and not link > 0:
        raise InvalidArgumentError("--link is the link's speed in Mb/s, above 0")
    if args.streams < 1:
        raise InvalidArgumentError("--streams must be at least 1")
    if args.output:  # a path that cannot be written is an error before anything is asked
        remote.check_output(args.output, points=args.where is not None)
    estimate = ds.estimate_fetch(variables, isel=isel, sel=sel, where=args.where)
    print(f"estimate: {estimate.advice(link)}", file=sys.stdout if args.estimate else sys.stderr)
    if args.estimate:
        return 0
    if not args.output:
        raise InvalidArgumentError(
            "-o FILE is needed (or --estimate, to only compare the subset with the whole dataset)"
        )
    t0 = time.perf_counter()
    size = ds.fetch(
        args.output,
        variables,
        isel=isel,
        sel=sel,
        where=args.where,
        streams=args.streams,
        progress=sys.stderr.isatty(),
        expected_bytes=estimate.subset_bytes,
    )
    dt_s = time.perf_counter() - t0
    rate = f", {human_rate(size * 8 / dt_s)}" if dt_s > 0 else ""
    print(f"wrote {args.output}: {_human(size)} in {dt_s:.2f} s over {args.streams} streams{rate}")
    return 0


def cmd_quicklook(args) -> int:
    from . import _core

    isel = ",".join(args.isel or []) or None
    png = _core.quicklook(args.store, args.variable, isel)
    with open(args.output, "wb") as f:
        f.write(png)
    print(f"wrote {args.output} ({_human(len(png))})")
    return 0


def cmd_log(args) -> int:
    from . import _core

    for v in reversed(_core.versions(args.store)):
        when = dt.datetime.fromtimestamp(v.created_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        recs = f"{v.records} records, " if v.records is not None else ""
        print(f"version {v.version}  {when}  {recs}{v.files} files, {_human(v.bytes)}  {v.message}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strata",
        description="Store large scientific arrays compressed, and query them reading as little as possible.",
        epilog="Run 'strata COMMAND --help' for the options of a command.",
    )
    p.add_argument("--version", action="version", version=f"strata {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser(
        "import",
        help="import a NetCDF-3/4 or HDF5 file into a new store",
        description="Import every variable of a NetCDF-3/4 or HDF5 file, bit-exact, with its "
        "attributes. Chunk shapes are chosen automatically unless given.",
    )
    s.add_argument("source", help="input file (.nc, .h5, ...)")
    s.add_argument("store", nargs="?", help="store directory to create (e.g. run.strata)")
    s.add_argument(
        "--codec",
        default="auto",
        help="'auto' (default: the analyzer picks per variable for --objective) or a chain for every "
        "variable: transforms shuffle, delta:AXIS, xor:AXIS, "
        "bitround:KEEPBITS (lossy, floats only) then one backend zstd:LEVEL, lz4, pco:LEVEL, bytecols:LEVEL, "
        "fpc:AXIS or raw; or alone an error-bounded lossy codec sz:abs=E, sz:rel=E, zfp:abs=E, zfp:rel=E; "
        "e.g. 'xor:0+shuffle+lz4', 'delta+pco', 'bitround:12+shuffle+zstd:5', 'sz:abs=0.01'",
    )
    s.add_argument(
        "--error-bound",
        metavar="abs=E|rel=E",
        help="allow lossy compression of float variables within this bound (absolute, or relative to the "
        "value range): --codec auto then also scores sz and zfp at that bound; integers stay lossless",
    )
    s.add_argument(
        "--objective",
        choices=["ratio", "speed", "balanced"],
        default="balanced",
        help="what --codec auto optimises: smallest size, fastest decoding, or (default) balanced: the "
        "quickest to write among chains that store 15%% less than netCDF4's zlib 4 + shuffle on the sample "
        "(else the smallest), decoding at 1 GB/s and encoding at 150 MB/s per core or faster; a variable of "
        "at most 1 MiB, stored whole, gets the smallest of chains encoding at 125 MB/s or faster",
    )
    s.add_argument(
        "--layout",
        default=None,
        help="priority order of the layout levels, any permutation of those used: S (space), V (value bins: "
        "value queries answered from the index) and M (precision: floats split into byte groups, so "
        "reduced-precision reads fetch fewer bytes), e.g. 'V-M-S', 'S-V', 'M-S' (default S, or the layout file "
        "STRATA_CONFIG names: docs/writing.md)",
    )
    s.add_argument(
        "--bins",
        type=int,
        metavar="N",
        help="value bins per slab and variable for level V (default 16; with --binning equal-width or equal-frequency)",
    )
    s.add_argument(
        "--binning",
        metavar="RULE",
        help="level V binning: equal-frequency (default, from a sample of each slab), equal-width (between "
        "each slab's min and max), or comma-separated boundaries, e.g. '0,10,20,25,28,30'",
    )
    s.add_argument(
        "--byte-groups",
        metavar="TYPE=W,W,...",
        action="append",
        help="byte groups for level M, most significant first (default f32=2,1,1 and f64=2,1,1,1,1,1,1)",
    )
    s.add_argument("--chunks", help="chunk length per dimension, e.g. 'time=16,lat=90' (others automatic)")
    s.add_argument("--subchunks", help="sub-chunk length per dimension, e.g. 'lat=30,lon=30'")
    s.add_argument(
        "--shape-rule",
        metavar="RULE",
        help="how the other lengths are chosen: auto (default: cube, or proportional when cubes would hold a "
        "few levels or months whole), cube (the longest axis is halved, so maps and series at a point read "
        "about as much), proportional (blocks keep the array's proportions, short axes cut too: for boxes "
        "over every axis) or slices (the leading axes are cut first: for maps)",
    )
    s.add_argument("--record-dim", help="dimension to cut slabs along (default: the unlimited one)")
    s.add_argument("--slab-records", type=int, help="records per slab (default: about 64 MiB per slab)")
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="write nothing: show what each variable would get (chain, blocks, chunks and the plan's looks), "
        "planned by the same code from the same data (no STORE needed)",
    )
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser(
        "index",
        help="index a NetCDF-4/HDF5 file in place, to query and serve it without a copy",
        description="Write an index beside a NetCDF-4/HDF5 file: the place, checksum and value summary "
        "(count, min, max) of every chunk. The file stays as it is; the index opens like a store "
        "(strata.open, strata query, strata sql) and 'strata serve' serves it, value queries included. "
        "Indexing again (after the file changed) makes a new version. Files whose chunks strata cannot "
        "decode (filters other than deflate, shuffle, fletcher32 and zstd; compact storage; "
        "NetCDF-3) are refused: 'strata import' copies them into a store.",
    )
    s.add_argument("source", help="the NetCDF-4/HDF5 file")
    s.add_argument("index", nargs="?", help="the index directory, beside the file (default: SOURCE.strata)")
    s.add_argument("--record-dim", help="dimension records run along (default: the unlimited one)")
    s.add_argument(
        "--binning",
        metavar="RULE",
        help="add value bins with their positions per chunk: comma-separated boundaries (a query whose bounds are "
        "boundaries, e.g. TEMP >= 25, is then answered from the index alone), or equal-frequency / equal-width with "
        "--bins N; the default keeps a summary (count, min, max) per chunk only",
    )
    s.add_argument("--bins", type=int, default=0, metavar="N", help="bins for --binning equal-frequency/equal-width")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_index)

    s = sub.add_parser(
        "export",
        help="write a store (one version) back to a NetCDF-4 file",
        description="Write every dimension, variable, value and attribute of a store to a NetCDF-4 file, as "
        "imported: values bit for bit in their stored type, attributes in their types, unlimited dimensions "
        "unlimited. Compressed with zlib and shuffle in the store's chunk shapes unless --no-compression. "
        "Written under a temporary name and renamed when complete.",
    )
    s.add_argument("store", help="the store")
    s.add_argument("out", help="the NetCDF-4 file to write")
    s.add_argument("--at", type=int, metavar="VERSION", help="export this version (default: the newest)")
    s.add_argument("--complevel", type=int, default=4, help="zlib level 1-9 (default 4)")
    s.add_argument("--no-compression", action="store_true", help="write uncompressed, contiguous variables")
    s.add_argument("--force", action="store_true", help="replace OUT if it exists")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser(
        "append",
        help="append the records of a file as a new version",
        description="Append the records of a file along the store's record dimension. Old versions stay readable.",
    )
    s.add_argument("store")
    s.add_argument("source")
    s.add_argument(
        "--keep-codecs",
        action="store_true",
        help="do not re-check codecs on the new records (by default new slabs switch to a chain "
        "at least 10%% better for the variable's objective)",
    )
    s.add_argument(
        "--objective",
        choices=["ratio", "speed", "balanced"],
        help="objective for the re-check (default: the one recorded when the variable was planned, else balanced)",
    )
    s.add_argument(
        "--allow-unordered",
        action="store_true",
        help="append records whose times are not after the store's last one (refused by default: duplicates or "
        "out-of-order times)",
    )
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_append)

    s = sub.add_parser("info", help="show dimensions, variables, attributes and storage figures")
    s.add_argument("store")
    s.add_argument("--at", dest="version", type=int, metavar="VERSION", help="store version to show (default: newest)")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser(
        "query",
        help="read a selection of a variable, or where a value constraint holds",
        description="Read a selection of one variable, by position (--isel) or by coordinate value (--sel), "
        "and print it or write it to .nc or .npy. With --where, answer a value query inside that region: "
        "the count, positions or points where the constraint holds, or the region with the rest masked.",
        epilog="examples:\n  strata query sst.strata sst --isel time=0 --sel lat=-10:10\n"
        "  strata query sst.strata sst --sel time=2000-01:2000-06 -o sub.nc\n"
        "  strata query sst.strata sst --where 'sst >= 28' --output count\n"
        "  strata query ocean.strata temp --where 'temp > 25 and salt < 35' --output points -o hot.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("store")
    s.add_argument("variable")
    s.add_argument(
        "--isel",
        action="append",
        metavar="DIM=START:STOP[:STEP]",
        help="positional selection (repeatable); a single index drops the dimension",
    )
    s.add_argument(
        "--sel",
        action="append",
        metavar="DIM=LO:HI",
        help="selection by coordinate value, both ends included, in the coordinate's order (lat=60:30 on a "
        "decreasing latitude); dates may be partial (2000-01); with --where, DIM may also be a 2-D "
        "(curvilinear) or mesh coordinate such as lat=60:90, selecting through a mask",
    )
    s.add_argument(
        "--method", choices=["nearest", "pad", "backfill"], help="how a single --sel value matches (default: exactly)"
    )
    s.add_argument(
        "--where",
        metavar="EXPR",
        help="value constraint, e.g. 'sst >= 28' or 'temp > 25 and (salt < 34 or salt > 36)': comparisons "
        "(< <= > >= == !=) of variables on the same dimensions with numbers, joined by and/or",
    )
    s.add_argument(
        "--output",
        choices=["dense", "points", "positions", "count"],
        default=None,
        help="with --where: dense (the region, NaN/masked where the constraint fails; default), points (a "
        "table of coordinates and values), positions (indices per dimension) or count",
    )
    s.add_argument(
        "--variables",
        metavar="A,B",
        help="with --where: variables whose values are returned (default: VARIABLE)",
    )
    s.add_argument(
        "-o",
        "--file",
        help="write the result to this file instead of printing: .nc or .npy (dense), .csv or .parquet "
        "(points, positions; written piece by piece, so results larger than memory work)",
    )
    prec = s.add_mutually_exclusive_group()
    prec.add_argument(
        "--precision",
        type=int,
        metavar="K",
        help="read only the first K byte groups of a float variable stored with layout level M",
    )
    prec.add_argument(
        "--max-rel-error",
        type=float,
        metavar="E",
        help="read the fewest byte groups whose worst relative error is at most E",
    )
    s.add_argument("--at", dest="version", type=int, metavar="VERSION", help="store version to read (default: newest)")
    s.add_argument("--max-print", type=int, default=200, help="print arrays up to this many elements in full")
    _plan_option(s)
    s.set_defaults(func=cmd_query)

    s = sub.add_parser(
        "sql",
        help="run SQL over a store (Apache DataFusion)",
        description="Run a SQL query over a store. Each group of variables on the same dimensions is a table "
        "with a column per dimension (coordinate values, CF times as timestamps) and per variable (NULL where "
        "NaN or fill). The group holding the most data (along the record dimension first) is named after the "
        "store (ersst.strata -> ersst); every group is also name_dim1_dim2 (see --tables). "
        "Filters on coordinates and values are answered by strata; the rest by DataFusion.",
        epilog="examples:\n  strata sql ersst.strata --tables\n"
        '  strata sql ersst.strata "SELECT lat, lon, sst FROM ersst WHERE sst > 28 AND lat BETWEEN -10 AND 10 '
        "AND time >= '2000-01-01'\"\n"
        '  strata sql ersst.strata "SELECT time, avg(sst) AS m FROM ersst WHERE lat > 60 GROUP BY time '
        'ORDER BY time" -o arctic.csv\n'
        '  strata sql ersst.strata "EXPLAIN SELECT count(*) FROM ersst WHERE sst > 28"   '
        "# the plans; the scan shows the engine's",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("store")
    s.add_argument("query", nargs="?", help="the SQL query")
    s.add_argument("--table", metavar="NAME", help="name of the store's main table (default: from the store's name)")
    s.add_argument("--tables", action="store_true", help="list the tables and their variables")
    s.add_argument("-o", "--file", help="stream the result to .csv, .parquet or .arrow instead of printing")
    s.add_argument("--max-print", type=int, default=40, help="rows printed (default 40)")
    _plan_option(s)
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser(
        "explain",
        help="show how a value query would be answered, and run it",
        description="Print the planner's estimate for each slab of a value query — bytes, segments and "
        "elements each method (index or scan) would read, and its estimated time — and the choice; then run "
        "the query and print the actual bytes and time.",
        epilog="example:\n  strata explain ersst.strata --where 'sst > 28' --sel lat=-10:10 --output points",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("store")
    s.add_argument("--where", required=True, metavar="EXPR", help="value constraint, as for `strata query`")
    s.add_argument("--isel", action="append", metavar="DIM=START:STOP[:STEP]", help="positional selection")
    s.add_argument(
        "--sel",
        action="append",
        metavar="DIM=LO:HI",
        help="selection by coordinate value; also a 2-D (curvilinear) or mesh coordinate, through a mask",
    )
    s.add_argument("--output", choices=["points", "dense", "positions", "count"], default="points")
    s.add_argument("--variables", metavar="A,B", help="variables returned (default: the constraint's)")
    s.add_argument("--no-run", action="store_true", help="only print the plan")
    s.add_argument("--at", dest="version", type=int, metavar="VERSION", help="store version (default: newest)")
    _plan_option(s)
    s.set_defaults(func=cmd_explain)

    s = sub.add_parser(
        "calibrate",
        help="measure the query planner's cost constants on this machine",
        description="Time index-driven and scan answers to value queries over a sweep of selectivities and "
        "outputs on generated stores, fit the cost model's constants (non-negative least squares on relative "
        "error) and store them in $STRATA_COST_MODEL or ~/.config/strata/cost_model.json.",
    )
    s.add_argument("--quick", action="store_true", help="smaller stores (a few seconds; less accurate)")
    s.add_argument("--repeats", type=int, default=3, help="timings per query, best kept (default 3)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_calibrate)

    s = sub.add_parser(
        "analyze",
        help="score codec chains on a sample of each variable",
        description="Compress a sample of each variable (blocks of the sub-chunk shape, spread over the "
        "leading dimension and at seeded positions along the others) with every candidate chain, and show "
        "its ratio, its declared and measured encode and decode speeds, and the chain each objective picks: "
        "ratio (smallest), speed (fastest declared decode among chains that compress) and balanced "
        "(among chains declared to decode at 1 GB/s and encode at 150 MB/s per core or faster, the quickest "
        "to encode of those that store 15% less than netCDF4's zlib 4 + shuffle on the sample, else the "
        "smallest). "
        "Choices use declared speeds, never timings, so the same data always gets the same plan. Under each "
        "table: what `strata import` with no options stores (the engine's own plan, on its own smaller "
        "sample, with its second looks; nothing is written), or for a store what it holds.",
    )
    s.add_argument("source", help="a NetCDF/HDF5 file or a store")
    s.add_argument("variables", nargs="*", help="variables to analyze (default: every numeric one)")
    s.add_argument("--samples", type=int, default=8, help="sample blocks per variable (default 8)")
    s.add_argument(
        "--error-bound",
        metavar="abs=E|rel=E",
        help="also score the error-bounded lossy codecs sz and zfp at this bound (float variables)",
    )
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser(
        "verify",
        help="check every file and segment of a store version against its checksums",
        description="Check every file of a version against the size and checksum its manifest records, every "
        "index against the format's bounds, each data file's header, and every segment of a damaged file "
        "against its own checksum; each problem is listed with its file, slab, variable and segment. Exit "
        "status 0: clean; 1: damaged; 2: the store cannot be opened at all.",
    )
    s.add_argument("store")
    s.add_argument("--at", dest="version", type=int, metavar="VERSION", help="version to check (default: newest)")
    s.add_argument("--deep", action="store_true", help="also read every variable back, decoding every segment")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser(
        "gc",
        help="remove files no version of a store needs (leftovers of failed writes)",
        description="Remove the data, index and temporary files that no committed version names: leftovers of "
        "writes that failed or were interrupted. Every version is kept, so readers of any version keep their "
        "files. A file no version names is removed only once older than the grace period, since a writer's "
        "files are unnamed until it commits: the grace period must exceed the longest a writer takes between "
        "its first file and its commit.",
    )
    s.add_argument("store")
    s.add_argument("--grace", type=float, default=3600.0, metavar="SECONDS", help="grace period (default 3600)")
    s.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    s.set_defaults(func=cmd_gc)

    s = sub.add_parser(
        "serve",
        help="serve every store under a directory over HTTP (JSON, Arrow, SQL) and OPeNDAP DAP2",
        description="Serve every store under DIR, subset at the server: by index, coordinates and values. "
        "A web page at /; JSON, Arrow, Parquet and CSV at /api/datasets, /api/schema/NAME, /api/query/NAME, "
        "/api/sql/NAME; NetCDF subsets in byte ranges at /api/subset/NAME; PNG quick looks at "
        "/api/quicklook/NAME; OPeNDAP DAP2 at /dap/NAME (.dds, .das, .dods, .ascii, .html), so "
        "netCDF4-python, ncdump and pydap open http://HOST:PORT/dap/NAME. Results stream; Ctrl-C stops "
        "after the requests in flight. docs/server.md has examples.",
    )
    s.add_argument("dir", nargs="?", help="directory holding stores (or one store); or root in --config")
    s.add_argument(
        "--config", metavar="FILE", help="server.toml: root, host, port, TLS certificate, [limits], per-dataset tokens"
    )
    s.add_argument("--host", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, help="port (default 8470; 0 picks a free one, printed at start)")
    s.add_argument("--max-requests", type=int, metavar="N", help="stop after answering N requests")
    s.add_argument("--max-seconds", type=float, metavar="S", help="stop after S seconds")
    s.add_argument("--quiet", action="store_true", help="no request log on stderr")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser(
        "fetch",
        help="download a subset of a served dataset (a NetCDF file, or points by value), over several connections",
        description="Download the dense subset of a dataset served by 'strata serve' (cut at the server) "
        "to a NetCDF file, or with --where the points where a value constraint holds (a column per dimension, "
        "then the variables) to a Parquet, CSV or Arrow file (by the suffix of -o). The answer comes over "
        "--streams connections at once, each part checked against the server's digest. First it says whether "
        "the subset or the whole dataset would come sooner: from the subset's size (for points, the exact count "
        "times the bytes per row of a sample), the whole dataset's and the server's cost-model estimate of its "
        "time to cut the subset, the link speed above which downloading the whole dataset wins (always, when "
        "the whole is no larger than the subset).",
        epilog="examples:\n  strata fetch http://127.0.0.1:8470/ersst --vars sst --sel time=2000-01:2000-12 "
        "-o sst2000.nc --streams 4\n"
        "  strata fetch http://127.0.0.1:8470/ersst --where 'sst > 28' --sel time=2000-01:2000-12 -o warm.parquet\n"
        "  strata fetch http://127.0.0.1:8470/ersst --isel time=0:600 --estimate --link 1000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("url", help="http://HOST:PORT/NAME of the dataset")
    s.add_argument("-o", "--output", help="file to write: NetCDF, or with --where .parquet, .csv or .arrow")
    s.add_argument(
        "--where",
        metavar="EXPR",
        help="points where a value constraint holds, e.g. 'sst > 28' (the engine's grammar: and, or, not)",
    )
    s.add_argument(
        "--vars",
        help="comma-separated variables (default: all, their coordinates coming along; with --where: the "
        "constrained ones)",
    )
    s.add_argument("--isel", action="append", metavar="DIM=RANGE", help="by position: INDEX or START:STOP[:STEP]")
    s.add_argument(
        "--sel",
        action="append",
        metavar="DIM=RANGE",
        help="by coordinate value: LABEL or LO:HI; with --where also a 2-D coordinate's range (latitude=60:)",
    )
    s.add_argument("--streams", type=int, default=4, help="connections at once (default 4)")
    s.add_argument("--token", help="the dataset's token, when the server protects it")
    s.add_argument(
        "--estimate", action="store_true", help="only say whether the subset or the whole dataset comes sooner"
    )
    s.add_argument("--link", type=float, metavar="MBPS", help="compare the two on a link of this speed (Mb/s)")
    s.set_defaults(func=cmd_fetch)

    s = sub.add_parser(
        "quicklook",
        help="draw a 2-D slice of a variable as a PNG with a colour scale",
        description="Draw a 2-D slice of a variable as a PNG (the picture the server's web page shows): select "
        "one index on every dimension but two with --isel. Large slices are drawn strided (at most about 1,024 "
        "pixels a side); missing values are grey; latitude is drawn north up.",
        epilog="example:\n  strata quicklook sst.strata sst --isel time=0 -o map.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("store")
    s.add_argument("variable")
    s.add_argument("--isel", action="append", metavar="DIM=INDEX", help="one index on each other dimension")
    s.add_argument("-o", "--output", required=True, help="PNG file to write")
    s.set_defaults(func=cmd_quicklook)

    s = sub.add_parser("log", help="list the versions of a store")
    s.add_argument("store")
    s.set_defaults(func=cmd_log)
    for sp in sub.choices.values():
        sp.add_argument("--version", action="version", version=f"strata {__version__}")
    return p


def _plan_option(s) -> None:
    s.add_argument(
        "--plan",
        choices=["auto", "index", "scan"],
        default="auto",
        help="how value constraints are answered: the cost model's choice (default), the index, or a scan",
    )


def _check_output_directory(path: str) -> None:
    """A result file (-o) goes into a directory that exists: said before any work is done,
    in the same words for every format (netCDF's own error for .nc was 'Permission
    denied')."""
    import os

    from .errors import NotFoundError

    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise NotFoundError(f"cannot write '{path}': no such directory '{parent}'")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "file", None):
            _check_output_directory(args.file)
        return args.func(args)
    except StrataError as err:
        print(f"strata {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of the output left (`strata info STORE | head`): stop quietly, as Unix
        # tools do; the interpreter's own flush at exit must not fail again on the pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (IndexError, KeyError) as err:
        print(f"strata {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        # A file the command reads or writes (-o into a missing directory, a full disk).
        where = f" '{err.filename}'" if err.filename else ""
        print(f"strata {args.command}: error:{where} {err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
