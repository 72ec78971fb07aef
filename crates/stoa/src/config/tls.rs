//! Certificates and keys, as every server takes them: a `tls` key of the file
//! (one `{ cert, key }` table or an array of them, several chosen by SNI), the
//! `--tls-cert`/`--tls-key` pairs of the command line, and the check that each
//! pair loads.

use std::path::PathBuf;

use stoa_netkit::tls::CertKeyFiles;
use toml::Value;

use super::Report;
use crate::cli::ServeArgs;

/// A `tls` key: one `{ cert, key }` table, or an array of them (several
/// certificates chosen by SNI). `None` when it is wrong (errors reported).
pub(super) fn read_certs(value: &Value, path: &str, r: &mut Report) -> Option<Vec<CertKeyFiles>> {
    let items: Vec<(String, &Value)> = match value {
        Value::Table(_) => vec![(format!("{path}."), value)],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{path}[{i}]."), v))
            .collect(),
        other => {
            r.errors.push(format!(
                "{path}: expected {{ cert = \"FILE\", key = \"FILE\" }} or a non-empty array \
                 of them, found {other}"
            ));
            return None;
        }
    };
    let expected = items.len();
    let mut certs = Vec::new();
    for (p, item) in items {
        let Some(t) = item.as_table() else {
            r.errors.push(format!(
                "{p}: expected {{ cert = \"FILE\", key = \"FILE\" }}"
            ));
            continue;
        };
        r.known_keys(t, &p, &["cert", "key"]);
        let mut file = |key: &str| {
            let v = r.string(t, &p, key);
            if v.is_none() && !t.contains_key(key) {
                r.errors.push(format!("{p}{key}: missing"));
            }
            v.map(PathBuf::from)
        };
        if let (Some(cert), Some(key)) = (file("cert"), file("key")) {
            certs.push(CertKeyFiles { cert, key });
        }
    }
    (certs.len() == expected).then_some(certs)
}

/// The `--tls-cert`/`--tls-key` pairs, in order (an unpaired one is left out).
pub(super) fn cert_pairs(args: &ServeArgs) -> Vec<CertKeyFiles> {
    args.tls_cert
        .iter()
        .zip(&args.tls_key)
        .map(|(cert, key)| CertKeyFiles {
            cert: cert.clone(),
            key: key.clone(),
        })
        .collect()
}

/// What is wrong with one certificate and key pair, a line each (none when it
/// loads).
pub(super) fn cert_errors(pair: &CertKeyFiles) -> Vec<String> {
    match stoa_netkit::tls::load_certified_keys(std::slice::from_ref(pair)) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}
