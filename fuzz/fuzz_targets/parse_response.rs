//! Response-head parser on arbitrary bytes; see `stoa_http_proto::fuzzing::response`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_http_proto::fuzzing::response(data));
