//! Replays the committed fuzz corpus (`fuzz/corpus/pop3_*`) through the fuzz targets,
//! so every input the fuzzer kept is also a regression test under plain `cargo test`.

use stoa_pop3_proto::fuzzing;
use stoa_testkit::fuzz::replay;

#[test]
fn session_corpus() {
    assert!(replay("pop3_session", fuzzing::session) > 0);
}

#[test]
fn encoder_corpus() {
    assert!(replay("pop3_encoder", fuzzing::encoder) > 0);
}

#[test]
fn command_corpus() {
    assert!(replay("pop3_command", fuzzing::command) > 0);
}
