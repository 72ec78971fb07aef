//! `stoa web99-cgi`: the SPECweb99 CGI GET (`web99.md` §6.2) as a CGI/1.1 program.
//!
//! The benchmark's CGI requests must be served by a real CGI program, a process per
//! request; this is it. Installed as `/cgi-bin/web99` by
//! `stoa fileset --cgi-dir DIR`, it reads `QUERY_STRING` and `DOCUMENT_ROOT` and
//! writes the same page as the built-in dynamic GET.

use std::io::Write;
use std::path::PathBuf;

use stoa_web99::request::{self, TRAILER};

/// Writes the CGI response for the request in the environment to standard output.
pub(crate) fn run() -> anyhow::Result<()> {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let query = var("QUERY_STRING");
    let response = match answer(&query, &var("DOCUMENT_ROOT")) {
        Ok(file) => {
            let wrapper = request::wrapper_head(
                &var("SERVER_SOFTWARE"),
                &var("REMOTE_ADDR"),
                &var("SCRIPT_NAME"),
                &query,
            );
            let len = wrapper.len() + file.len() + TRAILER.len();
            let mut out =
                format!("Content-Type: text/html\r\nContent-Length: {len}\r\n\r\n{wrapper}")
                    .into_bytes();
            out.extend_from_slice(&file);
            out.extend_from_slice(TRAILER);
            out
        }
        Err((status, why)) => {
            let reason = if status == 404 {
                "Not Found"
            } else {
                "Bad Request"
            };
            format!("Status: {status} {reason}\r\nContent-Type: text/plain\r\n\r\n{status} {reason}: {why}\n").into_bytes()
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&response)?;
    stdout.flush()?;
    Ok(())
}

/// The requested file's bytes, or the status and reason to refuse with.
fn answer(query: &str, docroot: &str) -> Result<Vec<u8>, (u16, String)> {
    if docroot.is_empty() {
        return Err((400, "no DOCUMENT_ROOT".into()));
    }
    // The path is checked: only plain segments, then file_set/dirNNNNN/classC_F.
    let (_, path) = request::parse_file(query).map_err(|e| (400, e.to_owned()))?;
    let full = PathBuf::from(docroot).join(path);
    match std::fs::symlink_metadata(&full) {
        Ok(m) if m.is_file() => std::fs::read(&full).map_err(|e| (404, e.to_string())),
        _ => Err((404, "no such file in the file set".into())),
    }
}
