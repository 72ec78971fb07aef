//! Files for tests: temporary directories, fixture files, and a small tmpfs for
//! disk-full tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh temporary directory, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("create a temporary directory")
}

/// Writes `bytes` to `path`, creating its parent directories.
pub fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create parent directories");
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A tmpfs mounted for a test, unmounted when dropped (also when the test fails).
///
/// Mounting needs the right to (root, or a user namespace); tests that cannot get
/// one say so and skip.
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `"2m"`) on `dir`, creating
    /// it; the error is why not (mount's own message).
    pub fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Tmpfs {
            dir: dir.to_owned(),
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Bytes an unprivileged writer may still use.
    pub fn free(&self) -> u64 {
        let st = rustix::fs::statvfs(&self.dir).expect("statvfs");
        st.f_bavail * st.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it: detach it so no mount outlives the test.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}
