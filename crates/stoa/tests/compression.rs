//! `Content-Encoding` of static files, driven over real sockets with curl and
//! raw requests, the bodies decoded by the real `gzip`, `brotli` and `zstd`
//! programs: compression on the fly (gzip, brotli) and its entity tags,
//! precompressed siblings written by `stoa compress` (zstd, brotli, gzip),
//! `Accept-Encoding` weights, `Vary`, conditional and range requests on the
//! encoded bytes, HEAD, what is never compressed (no `Accept-Encoding`, an
//! image, a tiny file), a stale sibling, and the configuration that turns it
//! all off.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Server, Site, fetch};

/// A stylesheet that compresses well.
fn css() -> Vec<u8> {
    let mut text = Vec::new();
    for i in 0..400 {
        writeln!(
            text,
            ".rule-{i} {{ color: #{:06x}; margin: 0 auto; }}",
            i * 997
        )
        .expect("write to a Vec");
    }
    text
}

/// `program -d -c` of `input`: the real decoder's output (bounded in time).
fn decode(program: &str, input: &[u8]) -> Vec<u8> {
    let mut command = Command::new(program);
    command.args(["-d", "-c"]);
    let done = stoa_testkit::run(&mut command, input, Duration::from_secs(30));
    assert!(
        done.status.success(),
        "{program} -d failed (scripts/test.sh installs it): {}",
        done.stderr
    );
    done.stdout.into_bytes()
}

fn start(site: &Site, args: &[&str]) -> Server {
    Server::start(site.root(), args)
}

#[test]
fn gzip_and_brotli_on_the_fly_decode_to_the_file() {
    let site = Site::new();
    let text = css();
    site.write("style.css", &text);
    let server = start(&site, &[]);
    let url = server.url("/style.css");

    let plain = fetch(&url, &[]);
    assert_eq!(plain.code, 200);
    assert_eq!(plain.body, text);
    assert_eq!(plain.header("Content-Encoding"), None);
    assert_eq!(plain.header("Vary"), None, "no Accept-Encoding, no Vary");
    let identity_tag = plain.header("ETag").expect("ETag").to_owned();

    let gz = fetch(&url, &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(gz.code, 200);
    assert_eq!(gz.header("Content-Encoding"), Some("gzip"));
    assert_eq!(gz.header("Vary"), Some("Accept-Encoding"));
    assert_eq!(gz.header("Content-Type"), plain.header("Content-Type"));
    assert!(gz.body.len() < text.len() / 4, "{} bytes", gz.body.len());
    assert_eq!(
        gz.header("Content-Length"),
        Some(gz.body.len().to_string().as_str())
    );
    assert_eq!(decode("gzip", &gz.body), text);
    let gz_tag = gz.header("ETag").expect("ETag").to_owned();
    assert_eq!(
        gz_tag,
        format!("{}-gz6\"", identity_tag.trim_end_matches('"'))
    );

    let br = fetch(&url, &["-H", "Accept-Encoding: gzip, deflate, br"]);
    assert_eq!(br.header("Content-Encoding"), Some("br"));
    assert_eq!(decode("brotli", &br.body), text);
    let br_tag = br.header("ETag").expect("ETag");
    assert!(br_tag.ends_with("-br5\""), "{br_tag}");

    // The same request again comes from the worker's cache: the same bytes.
    let again = fetch(&url, &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(again.body, gz.body);

    // curl's own decoding gives the file back.
    let decoded = fetch(&url, &["--compressed"]);
    assert_eq!(decoded.body, text);
    assert!(decoded.header("Content-Encoding").is_some());

    // HEAD: the encoded length, no body.
    let head = fetch(&url, &["--head", "-H", "Accept-Encoding: gzip"]);
    assert_eq!(
        head.header("Content-Length"),
        Some(gz.body.len().to_string().as_str())
    );
    assert_eq!(head.header("Content-Encoding"), Some("gzip"));
}

#[test]
fn weights_decide_and_identity_keeps_vary() {
    let site = Site::new();
    site.write("style.css", &css());
    let server = start(&site, &[]);
    let url = server.url("/style.css");
    let coding = |ae: &str| {
        let f = fetch(&url, &["-H", &format!("Accept-Encoding: {ae}")]);
        assert_eq!(f.code, 200, "{ae}");
        (
            f.header("Content-Encoding").map(str::to_owned),
            f.header("Vary").map(str::to_owned),
        )
    };
    let vary = Some("Accept-Encoding".to_owned());
    assert_eq!(
        coding("gzip;q=0.5, br;q=0.9"),
        (Some("br".into()), vary.clone())
    );
    assert_eq!(
        coding("br;q=0.1, gzip"),
        (Some("gzip".into()), vary.clone())
    );
    assert_eq!(coding("gzip;q=0.5, identity"), (None, vary.clone()));
    assert_eq!(coding("gzip;q=0"), (None, vary.clone()));
    assert_eq!(coding("*"), (Some("br".into()), vary.clone()));
    assert_eq!(coding("x-gzip"), (Some("gzip".into()), vary.clone()));
    // zstd is only ever sent from a sibling: none here.
    assert_eq!(coding("zstd"), (None, vary));
    assert_eq!(
        coding("deflate, compress"),
        (None, Some("Accept-Encoding".into()))
    );
}

#[test]
fn conditional_and_range_requests_apply_to_the_encoded_bytes() {
    let site = Site::new();
    site.write("style.css", &css());
    let server = start(&site, &[]);
    let url = server.url("/style.css");
    let gz = fetch(&url, &["-H", "Accept-Encoding: gzip"]);
    let tag = gz.header("ETag").expect("ETag").to_owned();
    let identity_tag = fetch(&url, &[]).header("ETag").expect("ETag").to_owned();

    let not_modified = fetch(
        &url,
        &[
            "-H",
            "Accept-Encoding: gzip",
            "-H",
            &format!("If-None-Match: {tag}"),
        ],
    );
    assert_eq!(not_modified.code, 304);
    assert_eq!(not_modified.header("ETag"), Some(tag.as_str()));
    assert_eq!(not_modified.header("Vary"), Some("Accept-Encoding"));
    // The identity's tag does not match the gzip representation.
    let other = fetch(
        &url,
        &[
            "-H",
            "Accept-Encoding: gzip",
            "-H",
            &format!("If-None-Match: {identity_tag}"),
        ],
    );
    assert_eq!(other.code, 200);

    let part = fetch(
        &url,
        &["-H", "Accept-Encoding: gzip", "-H", "Range: bytes=10-109"],
    );
    assert_eq!(part.code, 206);
    assert_eq!(part.body, &gz.body[10..110]);
    assert_eq!(
        part.header("Content-Range"),
        Some(format!("bytes 10-109/{}", gz.body.len()).as_str())
    );
    assert_eq!(part.header("Content-Encoding"), Some("gzip"));
    let stale = fetch(
        &url,
        &[
            "-H",
            "Accept-Encoding: gzip",
            "-H",
            "Range: bytes=10-109",
            "-H",
            &format!("If-Range: {identity_tag}"),
        ],
    );
    assert_eq!(
        stale.code, 200,
        "If-Range with another representation's tag"
    );
    assert_eq!(stale.body, gz.body);
}

#[test]
fn some_files_are_never_compressed() {
    let site = Site::new();
    site.write("photo.jpg", &css());
    site.write("tiny.css", b"p { margin: 0 }\n");
    let server = start(&site, &[]);
    // An image: not a type that is compressed, so nothing depends on the header.
    let photo = fetch(
        &server.url("/photo.jpg"),
        &["-H", "Accept-Encoding: gzip, br"],
    );
    assert_eq!(photo.code, 200);
    assert_eq!(photo.header("Content-Encoding"), None);
    assert_eq!(photo.header("Vary"), None);
    // Too small to compress on the fly; a sibling could still have served.
    let tiny = fetch(
        &server.url("/tiny.css"),
        &["-H", "Accept-Encoding: gzip, br"],
    );
    assert_eq!(tiny.header("Content-Encoding"), None);
    assert_eq!(tiny.header("Vary"), Some("Accept-Encoding"));
    let missing = fetch(
        &server.url("/nothing.css"),
        &["-H", "Accept-Encoding: gzip"],
    );
    assert_eq!(missing.code, 404);
    assert_eq!(missing.header("Content-Encoding"), None);
}

/// `stoa compress DIR`: its summary (standard output).
fn compress(dir: &Path) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(["compress", dir.to_str().expect("UTF-8 path")])
        .env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(60));
    assert!(
        done.status.success(),
        "stoa compress failed:\n{}",
        done.stderr
    );
    done.stdout
}

#[test]
fn precompressed_siblings_are_sent_as_they_are() {
    let site = Site::new();
    let text = css();
    site.write("style.css", &text);
    site.write("docs/index.html", &text.repeat(2));
    let out = compress(site.root());
    assert!(out.contains("written:"), "{out}");
    for ext in ["gz", "br", "zst"] {
        assert!(
            site.root().join(format!("style.css.{ext}")).is_file(),
            "{ext}"
        );
    }
    let server = start(&site, &[]);
    let url = server.url("/style.css");

    let zst = fetch(&url, &["-H", "Accept-Encoding: zstd"]);
    assert_eq!(zst.header("Content-Encoding"), Some("zstd"));
    assert_eq!(zst.header("Content-Type"), Some("text/css"));
    assert_eq!(zst.header("Vary"), Some("Accept-Encoding"));
    let on_disk = std::fs::read(site.root().join("style.css.zst")).expect("sibling");
    assert_eq!(zst.body, on_disk, "the sibling's own bytes");
    assert_eq!(decode("zstd", &zst.body), text);
    let tag = zst.header("ETag").expect("ETag");
    assert!(tag.ends_with("-zs\""), "{tag}");

    // brotli at 11 from the sibling, not 5 on the fly.
    let br = fetch(&url, &["-H", "Accept-Encoding: br, gzip"]);
    assert_eq!(
        br.body,
        std::fs::read(site.root().join("style.css.br")).expect("br sibling")
    );
    assert!(br.header("ETag").expect("ETag").ends_with("-br\""));

    // A directory's index has siblings too.
    let index = fetch(&server.url("/docs/"), &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(index.header("Content-Encoding"), Some("gzip"));
    assert_eq!(index.header("Content-Type"), Some("text/html"));
    assert_eq!(decode("gzip", &index.body), text.repeat(2));

    // A second run finds everything up to date.
    let again = compress(site.root());
    assert!(again.contains("written:        0"), "{again}");
}

#[test]
fn a_sibling_older_than_its_file_is_not_used() {
    let site = Site::new();
    let text = css();
    site.write("style.css", &text);
    let stale = site.write("style.css.gz", b"not the current file");
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .and_then(|f| f.set_modified(std::time::SystemTime::UNIX_EPOCH))
        .expect("age the sibling");
    let server = start(&site, &[]);
    let gz = fetch(&server.url("/style.css"), &["-H", "Accept-Encoding: gzip"]);
    assert_eq!(gz.header("Content-Encoding"), Some("gzip"));
    assert_eq!(
        decode("gzip", &gz.body),
        text,
        "compressed on the fly instead"
    );
}

#[test]
fn compression_can_be_turned_off() {
    let site = Site::new();
    site.write("style.css", &css());
    compress(site.root());
    let config = site.outside("stoa.toml");
    std::fs::write(
        &config,
        "[web.compression]\nprecompressed = false\non_the_fly = false\n",
    )
    .expect("write config");
    let server = start(&site, &["--config", config.to_str().expect("UTF-8 path")]);
    let f = fetch(
        &server.url("/style.css"),
        &["-H", "Accept-Encoding: gzip, br, zstd"],
    );
    assert_eq!(f.code, 200);
    assert_eq!(f.header("Content-Encoding"), None);
    assert_eq!(f.header("Vary"), None);
    assert_eq!(f.body, css());
}
