#!/bin/sh
# Coverage where the targets look for bugs: cargo-fuzz instruments every crate, and with
# DataFusion, arrow and sqlparser that is 2 million edge counters and a compare hook in
# every comparison, so libFuzzer's bookkeeping took about half of sql_query's time. Crates
# other than strata's own (and the targets) are compiled without it: the LLVM option given
# last wins over cargo-fuzz's. DataFusion still checks every answer; it is not what is fuzzed.
# Used by `make fuzz-server` as RUSTC_WRAPPER: "$1" is rustc, the rest its arguments.
rustc="$1"
shift
crate=""
prev=""
for arg in "$@"; do
  if [ "$prev" = "--crate-name" ]; then crate="$arg"; fi
  prev="$arg"
done
case "$crate" in
  strata_*|sql_query|server_request|"") exec "$rustc" "$@" ;;
  *) exec "$rustc" "$@" -Cllvm-args=-sanitizer-coverage-level=0 ;;
esac
