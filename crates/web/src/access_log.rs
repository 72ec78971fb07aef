//! The access log: Common Log Format (or combined), written after each response,
//! off the hot path.
//!
//! A server has one writer thread per distinct target (a file, standard output):
//! the server's log and each site's own. Each worker appends finished lines to its
//! own buffer for that target ([`LogBuffer`]); full buffers (and, once a second,
//! partial ones) are handed to the target's writer over a bounded channel. The
//! writer owns the file, so SIGHUP's reopen never races a write. When the channel
//! is full the batch is dropped and counted instead of stalling the event loop (the
//! count is reported in the error log). A reopen that fails is an error-log line
//! and counts in `stoa_log_reopen_failures_total`; the lines go on to the file
//! open before.
//!
//! Every byte taken from the request is escaped: bytes below 0x20, from 0x7f, `"`
//! and `\` become `\xHH`, as nginx does, so a request cannot split or forge lines.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::IpAddr;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stoa_http_proto::RequestHead;

use crate::config::{AccessLogTarget, LogFormat};

/// A worker's buffer of lines: allocated at this size, and handed over once it
/// holds [`FLUSH_AT`] bytes, so that a line of up to the difference (8 KiB;
/// longer ones only from the longest request fields) never makes it grow. (At
/// a threshold equal to the capacity, the line crossing it doubled every batch
/// to 64 KiB.)
const BATCH_CAPACITY: usize = 32 * 1024;
const FLUSH_AT: usize = 24 * 1024;
/// ... or once its oldest line is this old.
pub(crate) const BATCH_AGE: Duration = Duration::from_secs(1);
/// Batches in flight to the writer: 1024 × 32 KiB bounds the backlog at 32 MiB.
const CHANNEL_BATCHES: usize = 1024;
/// Longest escaped request field kept in a line (the head limits already bound
/// it; this keeps one line readable).
const MAX_FIELD: usize = 8 * 1024;

enum Message {
    Batch(Vec<u8>),
    Reopen,
    /// Everything before it is written; exit.
    Stop,
}

/// The sending side, shared by every worker.
#[derive(Debug, Clone)]
pub(crate) struct LogSink {
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    /// Written batches come back here to be filled again, so steady logging
    /// allocates nothing (and fresh buffers cannot pin the workers' heaps).
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Batch(b) => write!(f, "Batch({} bytes)", b.len()),
            Message::Reopen => f.write_str("Reopen"),
            Message::Stop => f.write_str("Stop"),
        }
    }
}

/// A request's saved log text and the access log its line goes to.
#[derive(Debug, Clone)]
pub(crate) struct LogText {
    /// Which of the server's logs: an index into `Shared::logs` (and into each
    /// worker's buffers).
    pub(crate) sink: usize,
    /// The text, a range of the connection's `Output::log_text`.
    pub(crate) text: Range<usize>,
}

/// Reopens the access-log files (for SIGHUP after logrotate moved them).
#[derive(Debug, Clone)]
pub struct LogReopener {
    /// Every writer of the server: its own log's and the sites'.
    sinks: Box<[LogSink]>,
}

impl LogReopener {
    /// Asks every writer to reopen its file. Does nothing for a log that goes to
    /// standard output, nor when no log is on.
    pub fn reopen(&self) {
        for sink in &self.sinks {
            // A full channel means the writer is busy; reopening can wait for the
            // next SIGHUP rather than block the signal handler's task.
            let _ = sink.tx.try_send(Message::Reopen);
        }
    }
}

/// The writer thread and its sink.
#[derive(Debug)]
pub(crate) struct AccessLog {
    sink: LogSink,
    thread: JoinHandle<()>,
    /// The file's path, or `-`, for messages.
    name: String,
}

impl AccessLog {
    /// Opens the target and starts the writer. Opening errors surface here, at
    /// start-up, not at the first request.
    pub(crate) fn start(target: &AccessLogTarget) -> io::Result<Option<AccessLog>> {
        let (out, name) = match target {
            AccessLogTarget::Off => return Ok(None),
            AccessLogTarget::Stdout => (Output::Stdout(io::stdout()), "-".to_owned()),
            AccessLogTarget::File(path) => (
                Output::File(open(path)?, path.clone()),
                path.display().to_string(),
            ),
        };
        let (tx, rx) = sync_channel(CHANNEL_BATCHES);
        let spare = Arc::new(Mutex::new(Vec::new()));
        let returns = Arc::clone(&spare);
        let thread = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_loop(out, &rx, &returns))?;
        Ok(Some(AccessLog {
            sink: LogSink {
                tx,
                dropped: Arc::new(AtomicU64::new(0)),
                spare,
            },
            thread,
            name,
        }))
    }

    /// The sending side, for the workers.
    pub(crate) fn sink(&self) -> LogSink {
        self.sink.clone()
    }

    /// Waits until every batch sent so far is written, then stops the writer. Call
    /// after the workers have flushed their buffers.
    pub(crate) fn finish(self) {
        let dropped = self.sink.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                "access log {}: {dropped} batches dropped because the writer fell behind",
                self.name
            );
        }
        // A blocking send is right here: shutdown waits for the log to be written.
        let _ = self.sink.tx.send(Message::Stop);
        if self.thread.join().is_err() {
            tracing::error!("access log {}: the writer panicked", self.name);
        }
    }
}

impl LogReopener {
    /// The reopener of every writer in `logs`.
    pub(crate) fn of(logs: &[AccessLog]) -> LogReopener {
        LogReopener {
            sinks: logs.iter().map(AccessLog::sink).collect(),
        }
    }
}

enum Output {
    Stdout(io::Stdout),
    File(File, PathBuf),
}

fn open(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

/// Spare batch buffers kept for reuse (256 KiB). The writer returns every
/// batch it has written; a worker taking one drops those beyond this, on its
/// own thread, where the allocator returns their memory at once. (Freed on the
/// writer's thread instead, a burst's batches stayed with the worker's heap
/// until it next allocated: 400 bytes per connection after 10,000 logged
/// requests on an idle server.)
const MAX_SPARE: usize = 8;

fn write_loop(mut out: Output, rx: &Receiver<Message>, spare: &Mutex<Vec<Vec<u8>>>) {
    // Ends at Stop, or when every sender is gone.
    while let Ok(message) = rx.recv() {
        match message {
            Message::Batch(mut batch) => {
                let result = match &mut out {
                    Output::Stdout(s) => s.lock().write_all(&batch).and_then(|()| s.flush()),
                    Output::File(f, _) => f.write_all(&batch),
                };
                if let Err(e) = result {
                    tracing::error!("access log write failed: {e}");
                }
                batch.clear();
                // A batch that grew past its size (a very long line) is not
                // reused; the rest go back for a worker to take or drop.
                if batch.capacity() == BATCH_CAPACITY
                    && let Ok(mut spare) = spare.lock()
                {
                    spare.push(batch);
                }
            }
            Message::Reopen => {
                if let Output::File(f, path) = &mut out {
                    match open(path) {
                        Ok(new) => *f = new,
                        Err(e) => {
                            crate::metrics::count_log_reopen_failure();
                            tracing::error!(
                                "cannot reopen the access log {}: {e}; its lines still go to \
                                 the file open before (the rotated one, after logrotate)",
                                path.display()
                            );
                        }
                    }
                }
            }
            Message::Stop => return,
        }
    }
}

/// A worker's buffer of finished lines.
#[derive(Debug, Default)]
pub(crate) struct LogBuffer {
    buf: Vec<u8>,
    /// When the oldest line buffered will have waited [`BATCH_AGE`]: a deadline,
    /// so that each line compares two `Instant`s rather than subtracting them.
    flush_by: Option<Instant>,
}

impl LogBuffer {
    /// Appends one line with `write`, then hands the buffer over if it is full or old.
    pub(crate) fn append(
        &mut self,
        sink: &LogSink,
        now: Instant,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let flush_by = *self.flush_by.get_or_insert(now + BATCH_AGE);
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(BATCH_CAPACITY);
        }
        write(&mut self.buf);
        if self.buf.len() >= FLUSH_AT || now >= flush_by {
            self.flush(sink);
        }
    }

    /// Hands whatever is buffered to the writer.
    pub(crate) fn flush(&mut self, sink: &LogSink) {
        if self.buf.is_empty() {
            return;
        }
        self.flush_by = None;
        let fresh = sink
            .spare
            .lock()
            .ok()
            .and_then(|mut spare| {
                // The extra spares are freed here, on this worker's thread.
                spare.truncate(MAX_SPARE);
                spare.pop()
            })
            .unwrap_or_else(|| Vec::with_capacity(BATCH_CAPACITY));
        let batch = std::mem::replace(&mut self.buf, fresh);
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            sink.tx.try_send(Message::Batch(batch))
        {
            sink.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether lines have waited at least [`BATCH_AGE`].
    pub(crate) fn is_stale(&self, now: Instant) -> bool {
        self.flush_by.is_some_and(|at| now >= at)
    }
}

/// Appends `bytes` escaped, at most [`MAX_FIELD`] of them.
pub(crate) fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes.iter().take(MAX_FIELD) {
        if !(0x20..0x7f).contains(&b) || b == b'"' || b == b'\\' {
            out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
        } else {
            out.push(b);
        }
    }
}

/// Separates the request-line part from the referer/user-agent part in a request's
/// saved log text; escaped text never holds a raw NUL.
const SEPARATOR: u8 = 0;

/// Saves what the log line needs from a request before its buffer is reused: the
/// escaped request line and, for the combined format, the quoted referer and user
/// agent.
pub(crate) fn capture_request(
    out: &mut Vec<u8>,
    head: &RequestHead<'_, '_>,
    format: LogFormat,
    http2: bool,
) {
    escape_into(out, head.method_token.as_bytes());
    out.push(b' ');
    escape_into(out, head.target);
    out.push(b' ');
    // An HTTP/2 request reaches the handlers as an HTTP/1.1 head (crate::h2);
    // the log names the protocol the client spoke, as nginx's does.
    let version = match http2 {
        true => "HTTP/2.0",
        false => head.version.as_str(),
    };
    out.extend_from_slice(version.as_bytes());
    if format == LogFormat::Combined {
        out.push(SEPARATOR);
        capture_quoted(out, head.header("Referer"));
        out.push(b' ');
        capture_quoted(out, head.header("User-Agent"));
    }
}

/// Saves the log text of a request whose head could not be parsed: its first line,
/// as far as it got.
pub(crate) fn capture_raw(out: &mut Vec<u8>, raw: &[u8], format: LogFormat) {
    let start = raw
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(raw.len());
    let line = &raw[start..];
    let line = &line[..memchr::memchr2(b'\r', b'\n', line).unwrap_or(line.len())];
    if line.is_empty() {
        out.push(b'-');
    } else {
        escape_into(out, line);
    }
    if format == LogFormat::Combined {
        out.push(SEPARATOR);
        out.extend_from_slice(b"\"-\" \"-\"");
    }
}

fn capture_quoted(out: &mut Vec<u8>, value: Option<&[u8]>) {
    out.push(b'"');
    match value {
        Some(v) => escape_into(out, v),
        None => out.push(b'-'),
    }
    out.push(b'"');
}

/// Writes `ip` as its `Display` does. An IPv4 address, every line of a
/// benchmark, goes digit by digit: `Display`'s formatting machinery was a tenth
/// of a small request's user-space instructions (callgrind).
fn write_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(digits.format(octet).as_bytes());
            }
        }
        IpAddr::V6(_) => {
            use std::io::Write as _;
            let _ = write!(out, "{ip}");
        }
    }
}

/// Appends one finished line: `host - - [date] "request" status bytes[ "ref" "ua"]`.
pub(crate) fn write_line(
    out: &mut Vec<u8>,
    peer: IpAddr,
    clf_date: &[u8],
    text: &[u8],
    status: u16,
    body_bytes: u64,
) {
    write_ip(out, peer);
    out.extend_from_slice(b" - - ");
    out.extend_from_slice(clf_date);
    out.extend_from_slice(b" \"");
    let (request, rest) = match memchr::memchr(SEPARATOR, text) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    out.extend_from_slice(request);
    out.extend_from_slice(b"\" ");
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(status).as_bytes());
    out.push(b' ');
    if body_bytes == 0 {
        out.push(b'-');
    } else {
        out.extend_from_slice(digits.format(body_bytes).as_bytes());
    }
    if let Some(rest) = rest {
        out.push(b' ');
        out.extend_from_slice(rest);
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "10.20.3.40",
            "::1",
            "2001:db8::7",
            "::ffff:1.2.3.4",
        ] {
            let ip: IpAddr = ip.parse().expect("an address");
            let mut out = Vec::new();
            write_ip(&mut out, ip);
            assert_eq!(out, ip.to_string().into_bytes());
        }
    }

    #[test]
    fn escaping_keeps_lines_whole() {
        let mut out = Vec::new();
        escape_into(&mut out, b"/a\"b\\c\nd\x00e\xff f");
        assert_eq!(out, b"/a\\x22b\\x5Cc\\x0Ad\\x00e\\xFF f");
    }

    #[test]
    fn common_and_combined_lines() {
        let raw = b"GET /x?a\"b HTTP/1.1\r\nHost: h\r\nUser-Agent: curl/8\r\n\r\n";
        let mut storage = stoa_http_proto::request::header_storage();
        let Ok(stoa_http_proto::Status::Complete(head)) =
            stoa_http_proto::parse_request(raw, &mut storage, &Default::default())
        else {
            panic!("valid head");
        };
        let date = b"[06/Nov/1994:08:49:37 +0000]";
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");

        let mut text = Vec::new();
        capture_request(&mut text, &head, LogFormat::Common, false);
        let mut line = Vec::new();
        write_line(&mut line, ip, date, &text, 200, 1234);
        assert_eq!(
            String::from_utf8(line).expect("ascii"),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /x?a\\x22b HTTP/1.1\" 200 1234\n"
        );

        let mut text = Vec::new();
        capture_request(&mut text, &head, LogFormat::Combined, false);
        let mut line = Vec::new();
        write_line(&mut line, ip, date, &text, 304, 0);
        assert_eq!(
            String::from_utf8(line).expect("ascii"),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /x?a\\x22b HTTP/1.1\" 304 - \"-\" \"curl/8\"\n"
        );
    }

    #[test]
    fn raw_capture_of_a_broken_head() {
        let mut text = Vec::new();
        capture_raw(
            &mut text,
            b"\r\nGET /\x7f HTTP/9\r\nX: y",
            LogFormat::Common,
        );
        assert_eq!(text, b"GET /\\x7F HTTP/9");
        let mut text = Vec::new();
        capture_raw(&mut text, b"", LogFormat::Common);
        assert_eq!(text, b"-");
    }
}
