//! Mail line framing and SASL decoding on arbitrary bytes; see
//! `stoa_mail_proto::fuzzing::lines`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stoa_mail_proto::fuzzing::lines(data));
