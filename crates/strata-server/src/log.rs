//! The server's log: one line per event on standard error, and nothing more. A log that can
//! no longer be written (its pipe closed, as under `strata serve 2>&1 | head`, or its
//! terminal gone) loses the line; `eprintln!` would panic instead, in every request that
//! logs, and the server would answer nothing while it ran on.

use std::io::Write;

/// Writes one line to standard error, ignoring a failure to write it.
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|_| err.write_all(b"\n"));
}

/// `log!("...", args)`: [`line`](fn@line) with `format!`'s syntax.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::log::line(format_args!($($arg)*))
    };
}
