use super::*;

/// A self-signed certificate for `names`, written as `stem.crt` / `stem.key` in `dir`.
fn write_pair(dir: &Path, stem: &str, names: &[&str]) -> CertKeyFiles {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let generated = rcgen::generate_simple_self_signed(names).expect("generate a certificate");
    let pair = CertKeyFiles {
        cert: dir.join(format!("{stem}.crt")),
        key: dir.join(format!("{stem}.key")),
    };
    std::fs::write(&pair.cert, generated.cert.pem()).expect("write the certificate");
    std::fs::write(&pair.key, generated.signing_key.serialize_pem()).expect("write the key");
    pair
}

fn messages(errors: &[Error]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn a_valid_pair_gives_a_config_with_alpn_and_resumption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = write_pair(dir.path(), "site", &["localhost"]);
    let config = server_config(&[pair], &[b"http/1.1"]).expect("valid pair");
    assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    assert!(config.ticketer.enabled());
    assert!(config.session_storage.can_cache());
}

#[test]
fn missing_files_are_each_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = CertKeyFiles {
        cert: dir.path().join("nope.crt"),
        key: dir.path().join("nope.key"),
    };
    let errors = messages(&load_certified_keys(&[pair]).expect_err("missing files"));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("certificate ") && errors[0].ends_with("nope.crt: no such file"));
    assert!(errors[1].starts_with("key ") && errors[1].ends_with("nope.key: no such file"));
}

#[test]
fn unreadable_empty_and_swapped_files_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = write_pair(dir.path(), "good", &["localhost"]);
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, b"not pem at all\n").expect("write");
    // A directory cannot be read as a file, even by root.
    let unreadable = CertKeyFiles {
        cert: dir.path().to_owned(),
        key: good.key.clone(),
    };
    let e = messages(&load_certified_keys(&[unreadable]).expect_err("directory"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("cannot read"), "{e:?}");

    let no_pem = CertKeyFiles {
        cert: empty.clone(),
        key: empty.clone(),
    };
    let e = messages(&load_certified_keys(&[no_pem]).expect_err("no PEM"));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("no PEM certificate"), "{e:?}");
    assert!(e[1].contains("no PEM private key"), "{e:?}");

    // The certificate given as the key and the other way round.
    let swapped = CertKeyFiles {
        cert: good.key.clone(),
        key: good.cert.clone(),
    };
    let e = messages(&load_certified_keys(&[swapped]).expect_err("swapped"));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("no PEM certificate"), "{e:?}");
    assert!(e[1].contains("no PEM private key"), "{e:?}");
}

#[test]
fn a_key_of_another_certificate_is_a_mismatch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = write_pair(dir.path(), "one", &["localhost"]);
    let two = write_pair(dir.path(), "two", &["localhost"]);
    let crossed = CertKeyFiles {
        cert: one.cert.clone(),
        key: two.key.clone(),
    };
    let e = messages(&load_certified_keys(&[one, crossed]).expect_err("mismatch"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("two.key does not match certificate") && e[0].ends_with("one.crt"),
        "{e:?}"
    );
    assert_eq!(
        messages(&load_certified_keys(&[]).expect_err("nothing")),
        vec!["no certificate and key given"]
    );
}

#[test]
fn sni_picks_by_subject_alternative_name_and_defaults_to_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pairs = [
        write_pair(dir.path(), "alpha", &["alpha.test"]),
        write_pair(dir.path(), "beta", &["beta.test", "*.beta.test"]),
    ];
    let resolver = SniResolver {
        keys: load_certified_keys(&pairs).expect("valid pairs"),
    };
    assert_eq!(resolver.choose(Some("alpha.test")), 0);
    assert_eq!(resolver.choose(Some("beta.test")), 1);
    assert_eq!(resolver.choose(Some("WWW.Beta.Test")), 1);
    assert_eq!(resolver.choose(Some("a.b.beta.test")), 0, "one label only");
    assert_eq!(resolver.choose(Some("gamma.test")), 0);
    assert_eq!(resolver.choose(None), 0);
}
