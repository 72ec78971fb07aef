//! POP3 encoder on arbitrary bytes; see `stoa_pop3_proto::fuzzing::encoder`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_pop3_proto::fuzzing::encoder(data));
