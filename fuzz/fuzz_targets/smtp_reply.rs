//! SMTP reply parser (client side) on arbitrary bytes; see
//! `stoa_smtp_proto::fuzzing::reply`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_smtp_proto::fuzzing::reply(data));
