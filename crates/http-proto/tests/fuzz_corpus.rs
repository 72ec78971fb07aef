//! Replays the committed fuzz corpus (`fuzz/corpus/`) through the fuzz targets, so
//! every input the fuzzer kept is also a regression test under plain `cargo test`.

use stoa_http_proto::fuzzing;
use stoa_testkit::fuzz::replay;

#[test]
fn parse_request_corpus() {
    assert!(replay("parse_request", fuzzing::request) > 0);
}

#[test]
fn chunked_corpus() {
    assert!(replay("chunked", fuzzing::chunked) > 0);
}

#[test]
fn parse_response_corpus() {
    assert!(replay("parse_response", fuzzing::response) > 0);
}
