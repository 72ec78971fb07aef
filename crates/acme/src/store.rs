//! The ACME state directory: the account's credentials and every certificate
//! with its key, each file written atomically.
//!
//! ```text
//! DIR/                    0700
//!   account.json          0600  instant-acme's AccountCredentials (the account key)
//!   certs/<name>/         0700  <name>: the certificate's first domain
//!     key.pem             0600  the certificate's private key
//!     cert.pem            0600  the chain, leaf first
//! ```
//!
//! Every file is written to a temporary file in the same directory, fsynced,
//! renamed over the old one and the directory fsynced, so a crash (kill -9,
//! power loss) leaves either the old file or the new one, whole. A certificate
//! is two files: the key is written first, and [`Store::load_cert`] checks that
//! the key belongs to the certificate, so a crash between the two renames is
//! seen as [`StoreError::KeyMismatch`] (obtain a new one), never served.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use instant_acme::AccountCredentials;

const ACCOUNT: &str = "account.json";
const CERTS: &str = "certs";
const CERT: &str = "cert.pem";
const KEY: &str = "key.pem";

/// What went wrong reading or writing the state directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file or directory could not be read, written or created.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// `account.json` is not instant-acme's account credentials.
    #[error("{}: {source}", path.display())]
    Account {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// `cert.pem` holds no parsable X.509 certificate.
    #[error("{}: not a PEM X.509 certificate: {reason}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// `key.pem` is not a private key, or not the key of `cert.pem`.
    #[error("{}: not the private key of the certificate beside it", path.display())]
    KeyMismatch {
        /// The key file.
        path: PathBuf,
    },
    /// A certificate name that is not a domain name (it names a directory).
    #[error("{name:?} is not a certificate name (a domain name)")]
    InvalidName {
        /// The name.
        name: String,
    },
}

/// A certificate read back from the store.
#[derive(Clone, Debug)]
pub struct Certificate {
    /// The chain, PEM, leaf first (as the CA sent it).
    pub chain_pem: String,
    /// The leaf's private key, PEM (PKCS#8).
    pub key_pem: String,
    /// The leaf's notBefore.
    pub not_before: SystemTime,
    /// The leaf's notAfter.
    pub not_after: SystemTime,
}

impl Certificate {
    /// When this certificate is due for renewal ([`crate::renew_at`]).
    pub fn renew_at(&self) -> SystemTime {
        crate::renew_at(self.not_before, self.not_after)
    }
}

/// The state directory. Cheap to clone (a path); every method is blocking I/O.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens the state directory `dir`, creating it (mode 0700) if missing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        make_dir(&dir)?;
        Ok(Self { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The stored account credentials, None when there is no account yet.
    pub fn load_account(&self) -> Result<Option<AccountCredentials>, StoreError> {
        let path = self.dir.join(ACCOUNT);
        let Some(bytes) = read_if_exists(&path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StoreError::Account { path, source })
    }

    /// Stores the account credentials, replacing any before.
    pub fn save_account(&self, credentials: &AccountCredentials) -> Result<(), StoreError> {
        let path = self.dir.join(ACCOUNT);
        let json = serde_json::to_vec_pretty(credentials)
            .map_err(|source| StoreError::Account { path, source })?;
        write_atomic(&self.dir, ACCOUNT, &json)
    }

    /// The directory of certificate `name`.
    fn cert_dir(&self, name: &str) -> Result<PathBuf, StoreError> {
        if !is_name(name) {
            return Err(StoreError::InvalidName {
                name: name.to_owned(),
            });
        }
        Ok(self.dir.join(CERTS).join(name))
    }

    /// Stores certificate `name` (its first domain): the key, then the chain.
    pub fn save_cert(&self, name: &str, chain_pem: &str, key_pem: &str) -> Result<(), StoreError> {
        let dir = self.cert_dir(name)?;
        make_dir(&self.dir.join(CERTS))?;
        make_dir(&dir)?;
        write_atomic(&dir, KEY, key_pem.as_bytes())?;
        write_atomic(&dir, CERT, chain_pem.as_bytes())
    }

    /// Reads certificate `name` back, None when it was never stored.
    pub fn load_cert(&self, name: &str) -> Result<Option<Certificate>, StoreError> {
        let dir = self.cert_dir(name)?;
        let cert_path = dir.join(CERT);
        let key_path = dir.join(KEY);
        let Some(chain) = read_if_exists(&cert_path)? else {
            return Ok(None);
        };
        let Some(key) = read_if_exists(&key_path)? else {
            return Ok(None);
        };
        let bad_cert = |reason: String| StoreError::Certificate {
            path: cert_path.clone(),
            reason,
        };
        let chain_pem = String::from_utf8(chain).map_err(|e| bad_cert(e.to_string()))?;
        let key_pem = String::from_utf8(key).map_err(|_| StoreError::KeyMismatch {
            path: key_path.clone(),
        })?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(chain_pem.as_bytes())
            .map_err(|e| bad_cert(e.to_string()))?;
        let leaf = pem.parse_x509().map_err(|e| bad_cert(e.to_string()))?;
        let validity = leaf.validity();
        let not_before = to_system_time(validity.not_before.timestamp());
        let not_after = to_system_time(validity.not_after.timestamp());
        let key = rcgen::KeyPair::from_pem(&key_pem).map_err(|_| StoreError::KeyMismatch {
            path: key_path.clone(),
        })?;
        if rcgen::PublicKeyData::subject_public_key_info(&key) != leaf.public_key().raw {
            return Err(StoreError::KeyMismatch { path: key_path });
        }
        Ok(Some(Certificate {
            chain_pem,
            key_pem,
            not_before,
            not_after,
        }))
    }
}

fn to_system_time(unix: i64) -> SystemTime {
    match u64::try_from(unix) {
        Ok(secs) => SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
        Err(_) => SystemTime::UNIX_EPOCH - Duration::from_secs(unix.unsigned_abs()),
    }
}

/// A certificate name: a domain name (letters, digits, `-`, `.`, a leading
/// `*.` for a wildcard), so never `..`, a `/` or a hidden file.
fn is_name(name: &str) -> bool {
    let rest = name.strip_prefix("*.").unwrap_or(name);
    !rest.is_empty()
        && rest.len() <= 253
        && !rest.starts_with('.')
        && !rest.contains("..")
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Creates `dir` (mode 0700, parents too) and, when it is new, fsyncs its
/// parent so the new name survives a crash.
fn make_dir(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err(dir))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Writes `dir/name` atomically: a temporary file in `dir` (mode 0600, created
/// new), fsync, rename over `name`, fsync `dir`. A failure removes the
/// temporary file; a crash may leave one (a hidden `.name.*.tmp`), never a
/// partial `name`.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let target = dir.join(name);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, &target));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(&target)(e));
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    /// A self-signed certificate for `name` and its key, PEM.
    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn cert_round_trip_and_modes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(tmp.path().join("acme")).expect("open");
        assert_eq!(mode(store.dir()), 0o700);
        assert!(store.load_cert("a.example").expect("load").is_none());
        let (chain, key) = self_signed("a.example");
        store.save_cert("a.example", &chain, &key).expect("save");
        let dir = store.dir().join("certs/a.example");
        assert_eq!(mode(&store.dir().join("certs")), 0o700);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("cert.pem")), 0o600);
        assert_eq!(mode(&dir.join("key.pem")), 0o600);
        let cert = store.load_cert("a.example").expect("load").expect("stored");
        assert_eq!(cert.chain_pem, chain);
        assert_eq!(cert.key_pem, key);
        // rcgen's defaults: 1975-01-01 to 4096-01-01.
        assert!(cert.not_before < SystemTime::now() && cert.not_after > SystemTime::now());
        assert!(cert.renew_at() > cert.not_before && cert.renew_at() < cert.not_after);
        // Only the two files: no temporary file left behind.
        let mut names: Vec<_> = fs::read_dir(&dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["cert.pem", "key.pem"]);
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(tmp.path()).expect("open");
        let (chain, _) = self_signed("a.example");
        let (_, other_key) = self_signed("a.example");
        store
            .save_cert("a.example", &chain, &other_key)
            .expect("save");
        assert!(matches!(
            store.load_cert("a.example"),
            Err(StoreError::KeyMismatch { .. })
        ));
    }

    #[test]
    fn names_that_are_not_domains_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(tmp.path()).expect("open");
        for bad in ["", "..", "../x", "a/b", ".hidden", "a..b", "*.", "a b"] {
            assert!(
                matches!(
                    store.save_cert(bad, "c", "k"),
                    Err(StoreError::InvalidName { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(is_name("*.example.org") && is_name("a-b.example"));
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_whole() {
        let tmp = tempfile::tempdir().expect("tempdir");
        write_atomic(tmp.path(), "f", b"old").expect("write");
        assert_eq!(mode(&tmp.path().join("f")), 0o600);
        // The rename fails (a non-empty directory is in the way of "d"): the
        // temporary file is removed and nothing else changes.
        fs::create_dir(tmp.path().join("d")).expect("mkdir");
        fs::write(tmp.path().join("d/x"), b"x").expect("write");
        assert!(write_atomic(tmp.path(), "d", b"new").is_err());
        let mut names: Vec<_> = fs::read_dir(tmp.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["d", "f"]);
        assert_eq!(fs::read(tmp.path().join("f")).expect("read"), b"old");
    }

    /// The child half of `kill_9_mid_write_leaves_old_or_new_whole`: rewrites
    /// one big file forever, alternating two contents.
    #[test]
    #[ignore = "run only as the child of kill_9_mid_write_leaves_old_or_new_whole"]
    fn child_rewrites_forever() {
        let Some(dir) = std::env::var_os("STOA_ACME_CHILD_DIR") else {
            return;
        };
        let dir = PathBuf::from(dir);
        for i in 0u64.. {
            let byte = if i % 2 == 0 { b'a' } else { b'b' };
            write_atomic(&dir, "f", &vec![byte; 8 << 20]).expect("write");
        }
    }

    #[test]
    fn kill_9_mid_write_leaves_old_or_new_whole() {
        let tmp = tempfile::tempdir().expect("tempdir");
        write_atomic(tmp.path(), "f", &vec![b'o'; 8 << 20]).expect("write");
        let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--ignored",
                "--exact",
                "store::tests::child_rewrites_forever",
            ])
            .env("STOA_ACME_CHILD_DIR", tmp.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        // Kill it once a temporary file exists (a write in flight), or at the
        // deadline whatever it is doing.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            let in_flight = fs::read_dir(tmp.path())
                .expect("read_dir")
                .filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"));
            if in_flight && mode(&tmp.path().join("f")) == 0o600 {
                break;
            }
            std::thread::yield_now();
        }
        child.kill().expect("kill");
        child.wait().expect("wait");
        let f = fs::read(tmp.path().join("f")).expect("read");
        assert_eq!(f.len(), 8 << 20);
        assert!(
            f.iter().all(|&b| b == f[0]) && b"oab".contains(&f[0]),
            "a torn file"
        );
    }
}
