//! The C allocator's arenas, set when `strata._core` loads.
//!
//! A query runs in pieces whose buffers (values read, positions kept, result columns) are
//! megabytes each, filled on one thread (the engine's pool, DataFusion's workers) and freed
//! on another. glibc gives threads up to eight arenas per core and trims each one's free top
//! back to the kernel on its own, so the next piece's buffers come as fresh pages the kernel
//! must fault in and zero: a third of a one-shot SQL points query on ERSST x4. With one arena
//! per core the next piece finds the freed memory again (bench_sql_oneshot: 50% of ERSST x4
//! 231 -> 184 ms), and a server streaming a 334 MiB answer peaked no higher (101–121 MiB
//! against 112–125). A limit the user set (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max`
//! in `GLIBC_TUNABLES`) is left alone; other C libraries (musl, macOS) are not touched.
//!
//! Freed blocks are kept for reuse the same way ([`keep_freed_blocks`]).

use pyo3::prelude::*;
use std::sync::OnceLock;

static LIMIT: OnceLock<Option<usize>> = OnceLock::new();

/// Whether the user set one of these malloc parameters: by its environment variable, or in
/// `GLIBC_TUNABLES`. Such a choice is left alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn user_chose(env: &[&str], tunables: &[&str]) -> bool {
    env.iter().any(|k| std::env::var_os(k).is_some())
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| tunables.iter().any(|k| t.contains(k)))
}

/// Limits glibc's arenas to the cores this process may use, once; the limit set, or None
/// when the user chose one or the C library is not glibc.
pub(crate) fn limit_arenas() -> Option<usize> {
    *LIMIT.get_or_init(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            if user_chose(&["MALLOC_ARENA_MAX"], &["glibc.malloc.arena_max"]) {
                return None;
            }
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(1024);
            // SAFETY: mallopt sets one malloc parameter under glibc's own lock; arenas that
            // exist stay, and new threads share the existing ones once the limit is reached.
            let set = unsafe { libc::mallopt(libc::M_ARENA_MAX, cores as libc::c_int) } == 1;
            set.then_some(cores)
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            None
        }
    })
}

/// Blocks up to this size come from the heap rather than their own mapping (glibc's dynamic
/// threshold stops rising here too).
const MMAP_THRESHOLD: usize = 32 << 20;
/// A free heap top under this size stays for the next allocation.
const TRIM_THRESHOLD: usize = 16 << 20;

static THRESHOLDS: OnceLock<Option<(usize, usize)>> = OnceLock::new();

/// Keeps freed blocks of up to [`MMAP_THRESHOLD`] for reuse (a free top of up to
/// [`TRIM_THRESHOLD`]), once; the thresholds set, or None when the user chose them or the C
/// library is not glibc. netCDF's library reads the first 4 MiB of every file it opens into
/// two new buffers to find its 8 magic bytes (`NC_readfileF`); under glibc's dynamic
/// thresholds, which rise only to the largest block freed so far, those buffers were trimmed
/// and came back as fresh pages on every open (a 28 MB file: 4.8 ms an open, 0.75 ms with
/// the blocks kept), as did an import's slab buffers. A process keeps at most the trim
/// threshold of free top per arena.
pub(crate) fn keep_freed_blocks() -> Option<(usize, usize)> {
    *THRESHOLDS.get_or_init(|| {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let env = ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"];
            let tunables = [
                "glibc.malloc.mmap_threshold",
                "glibc.malloc.trim_threshold",
                "glibc.malloc.top_pad",
                "glibc.malloc.mmap_max",
            ];
            if user_chose(&env, &tunables) {
                return None;
            }
            // SAFETY: mallopt sets one malloc parameter under glibc's own lock.
            let set = unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1
                    && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD as libc::c_int) == 1
            };
            set.then_some((MMAP_THRESHOLD, TRIM_THRESHOLD))
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            None
        }
    })
}

/// The thresholds `strata._core` set when it loaded, (mmap, trim) in bytes (None: left to
/// the user or the system).
#[pyfunction]
pub fn malloc_thresholds() -> Option<(usize, usize)> {
    keep_freed_blocks()
}

/// The arena limit `strata._core` set when it loaded (None: left to the user or the system).
#[pyfunction]
pub fn malloc_arena_limit() -> Option<usize> {
    limit_arenas()
}
