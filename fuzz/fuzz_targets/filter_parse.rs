//! Parse arbitrary bytes as a filter; when it parses, evaluate it on a fixed batch (syscall, block
//! and process events; files, long paths and TCP/UDP socket names; exec command lines) and check
//! the invariants of `latscope_filter::fuzz_support::check_one`: no panic, errors render with a
//! caret, the push-down never drops a matching event and admits exactly the matches of the kinds
//! it calls exact, its clauses are spans of the source, matches lie in `needs_kinds()`, `not (F)` is
//! the complement of `F`, and every field used yields its value. The dictionary has every field
//! (socket, argument and command-line fields, dates), transformers, list modifiers and typical values.
//!
//! cargo +nightly fuzz run filter_parse fuzz/corpus/filter_parse fuzz/seeds/filter_parse -- -dict=fuzz/filter.dict
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    latscope_filter::fuzz_support::check_one(data);
});
