//! The write queue of one connection: the responses to a batch of pipelined requests,
//! written with as few system calls as possible.
//!
//! Heads (and small generated bodies) are encoded back to back into one buffer; file
//! contents are referenced, never copied: cached contents as [`Bytes`], larger files
//! as an open descriptor for `sendfile`. [`Output::fill_iovecs`] gathers every memory
//! segment up to the next file into one `writev`/`sendmsg`, so a batch of small
//! responses leaves in a single system call, and a head followed by a file goes out
//! with `MSG_MORE` so the kernel merges it with the first file bytes.
//!
//! Over TLS there is no `sendfile` (no kTLS): [`Output::gather_plaintext`] hands
//! the memory segments to the TLS writer as they are and reads file ranges into a
//! worker's scratch buffer, a bounded batch at a time.

use std::fs::File;
use std::io::{self, IoSlice};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::access_log::LogText;
use crate::metrics::Tally;

/// Most iovecs per `sendmsg` (Linux allows 1024; hyper uses 64 too).
pub(crate) const MAX_IOVECS: usize = 64;

/// Largest slice handed to one `sendfile` call, so one connection cannot hog the
/// event loop with a multi-gigabyte transfer.
pub(crate) const MAX_SENDFILE_CHUNK: usize = 1 << 20;

#[derive(Debug)]
enum Segment {
    /// A range of [`Output::heads`].
    Heads(Range<usize>),
    /// Shared bytes (a cached file).
    Body(Bytes),
    /// `len` bytes of a file from `offset`.
    File {
        fd: Arc<File>,
        offset: u64,
        len: u64,
    },
}

impl Segment {
    fn len(&self) -> u64 {
        match self {
            Segment::Heads(r) => (r.end - r.start) as u64,
            Segment::Body(b) => b.len() as u64,
            Segment::File { len, .. } => *len,
        }
    }
}

/// One queued response, for byte accounting and the access log.
#[derive(Debug)]
pub(crate) struct Queued {
    /// Status code sent.
    pub(crate) status: u16,
    /// The request's method and site, and when its answer began, as counted.
    pub(crate) tally: Tally,
    /// Bytes of head.
    pub(crate) head_len: u64,
    /// Bytes of body.
    pub(crate) body_len: u64,
    /// The access-log text of the request (escaped request line, referer, user
    /// agent), as a range of [`Output::log_text`], and the log it goes to;
    /// `None` when the request's site does not log.
    pub(crate) log: Option<LogText>,
}

/// What [`Output::peek`] hands out.
#[derive(Debug)]
pub(crate) enum Chunk {
    Bytes(Bytes),
    /// `len` bytes of a file from `offset`.
    File {
        fd: Arc<File>,
        offset: u64,
        len: u64,
    },
}

impl Chunk {
    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File { len, .. } => *len as usize,
        }
    }
}

/// A file to send with `sendfile`.
pub(crate) struct FileSlice<'a> {
    pub(crate) fd: &'a Arc<File>,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// The queue. Empty and allocation-free while a connection is idle.
#[derive(Debug, Default)]
pub(crate) struct Output {
    heads: Vec<u8>,
    segments: Vec<Segment>,
    /// First segment not completely written, and bytes of it already written.
    cursor: usize,
    cursor_offset: u64,
    queued: Vec<Queued>,
    log_text: Vec<u8>,
    /// Bytes written since the queue was last cleared.
    written: u64,
    /// Bytes of interim responses (`100 Continue`) queued, not part of any response.
    interim: u64,
}

impl Output {
    /// The head buffer, for encoding the next response head into.
    pub(crate) fn heads_mut(&mut self) -> &mut Vec<u8> {
        if self.heads.capacity() == 0 {
            // One allocation that fits a batch of typical heads.
            self.heads.reserve(2048);
        }
        &mut self.heads
    }

    /// The log-text buffer, for escaping the next request's log fields into.
    pub(crate) fn log_text_mut(&mut self) -> &mut Vec<u8> {
        &mut self.log_text
    }

    /// Queues a response: its head (a range of the head buffer), then `body`.
    pub(crate) fn push(
        &mut self,
        (status, tally): (u16, Tally),
        head: Range<usize>,
        body: Body,
        log: Option<LogText>,
    ) {
        let head_len = (head.end - head.start) as u64;
        self.push_heads(head);
        let body_len = match body {
            Body::Parts(parts) => parts.into_iter().map(|p| self.push_body(p)).sum(),
            single => self.push_body(single),
        };
        self.queued.push(Queued {
            status,
            tally,
            head_len,
            body_len,
            log,
        });
    }

    /// Queues bytes that are not a response of their own (`100 Continue`).
    pub(crate) fn push_interim(&mut self, bytes: &'static [u8]) {
        self.segments.push(Segment::Body(Bytes::from_static(bytes)));
        self.interim += bytes.len() as u64;
    }

    /// Appends one body part's segments; returns its length.
    fn push_body(&mut self, body: Body) -> u64 {
        match body {
            Body::Empty => 0,
            Body::Heads(range) => {
                let n = (range.end - range.start) as u64;
                self.push_heads(range);
                n
            }
            Body::Bytes(b) => {
                let n = b.len() as u64;
                if n > 0 {
                    self.segments.push(Segment::Body(b));
                }
                n
            }
            Body::File { fd, offset, len } => {
                if len > 0 {
                    self.segments.push(Segment::File { fd, offset, len });
                }
                len
            }
            Body::Parts(parts) => parts.into_iter().map(|p| self.push_body(p)).sum(),
        }
    }

    /// Appends a head-buffer range, merged with the previous segment when adjacent.
    fn push_heads(&mut self, range: Range<usize>) {
        if let Some(Segment::Heads(last)) = self.segments.last_mut()
            && last.end == range.start
        {
            last.end = range.end;
            return;
        }
        self.segments.push(Segment::Heads(range));
    }

    /// Number of responses queued.
    pub(crate) fn responses(&self) -> usize {
        self.queued.len()
    }

    /// Whether a file segment is still to be written.
    pub(crate) fn has_file(&self) -> bool {
        self.segments[self.cursor..]
            .iter()
            .any(|s| matches!(s, Segment::File { .. }))
    }

    /// Nothing left to write.
    pub(crate) fn is_done(&self) -> bool {
        self.cursor == self.segments.len()
    }

    /// Fills `iov` with the memory segments from the cursor up to the next file
    /// segment. Returns how many were filled and whether a file segment follows.
    pub(crate) fn fill_iovecs<'a>(&'a self, iov: &mut [IoSlice<'a>; MAX_IOVECS]) -> (usize, bool) {
        let mut n = 0;
        for (i, seg) in self.segments[self.cursor..].iter().enumerate() {
            let skip = if i == 0 {
                self.cursor_offset as usize
            } else {
                0
            };
            let bytes: &[u8] = match seg {
                Segment::Heads(r) => &self.heads[r.start + skip..r.end],
                Segment::Body(b) => &b[skip..],
                Segment::File { .. } => return (n, true),
            };
            iov[n] = IoSlice::new(bytes);
            n += 1;
            if n == MAX_IOVECS {
                break;
            }
        }
        (n, false)
    }

    /// Fills `iov` with up to `budget` bytes from the cursor, for a TLS writer:
    /// memory segments as they are, and the bytes of one file segment read into
    /// `scratch` (as many as fit; a second file, or the rest of a file that did not
    /// fit, waits for the next batch).
    /// Returns how many slices were filled; their total is what to
    /// [`Output::advance`] by once they are written.
    pub(crate) fn gather_plaintext<'a>(
        &'a self,
        iov: &mut [IoSlice<'a>; MAX_IOVECS],
        scratch: &'a mut [u8],
        budget: usize,
    ) -> io::Result<usize> {
        let (mut n, mut total) = (0, 0);
        let mut scratch = Some(scratch);
        for (i, seg) in self.segments[self.cursor..].iter().enumerate() {
            if n == MAX_IOVECS || total >= budget {
                break;
            }
            let skip = if i == 0 { self.cursor_offset } else { 0 };
            let bytes: &[u8] = match seg {
                Segment::Heads(r) => &self.heads[r.start + skip as usize..r.end],
                Segment::Body(b) => &b[skip as usize..],
                Segment::File { fd, offset, len } => {
                    let Some(scratch) = scratch.take() else { break };
                    let want = (len - skip).min((budget - total).min(scratch.len()) as u64);
                    let got = fd.read_at(&mut scratch[..want as usize], offset + skip)?;
                    if got == 0 {
                        // The file shrank under us: `sendfile` would stop the same way.
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    iov[n] = IoSlice::new(&scratch[..got]);
                    n += 1;
                    total += got;
                    if (got as u64) < len - skip {
                        // The rest of the file comes first in the next batch.
                        break;
                    }
                    continue;
                }
            };
            let bytes = &bytes[..bytes.len().min(budget - total)];
            iov[n] = IoSlice::new(bytes);
            n += 1;
            total += bytes.len();
        }
        Ok(n)
    }

    /// The file segment at the cursor, if that is what comes next.
    pub(crate) fn file_at_cursor(&self) -> Option<FileSlice<'_>> {
        match self.segments.get(self.cursor)? {
            Segment::File { fd, offset, len } => Some(FileSlice {
                fd,
                offset: offset + self.cursor_offset,
                len: len - self.cursor_offset,
            }),
            _ => None,
        }
    }

    /// The responses queued since the queue was last cleared.
    /// Up to `max` bytes at the cursor, without advancing it: memory as shared
    /// bytes (heads copied, cached bodies shared), a file as its range for the
    /// caller to read. For a writer that frames the bytes itself (HTTP/2);
    /// `None` once everything is written.
    pub(crate) fn peek(&self, max: usize) -> Option<Chunk> {
        let seg = self.segments.get(self.cursor)?;
        let skip = self.cursor_offset;
        let take = (seg.len() - skip).min(max as u64);
        let (start, end) = (skip as usize, (skip + take) as usize);
        Some(match seg {
            Segment::Heads(r) => Chunk::Bytes(Bytes::copy_from_slice(
                &self.heads[r.start + start..r.start + end],
            )),
            Segment::Body(b) => Chunk::Bytes(b.slice(start..end)),
            Segment::File { fd, offset, .. } => Chunk::File {
                fd: Arc::clone(fd),
                offset: offset + skip,
                len: take,
            },
        })
    }

    pub(crate) fn queued(&self) -> &[Queued] {
        &self.queued
    }

    /// Bytes written since the queue was last cleared.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Records that `n` more bytes were written.
    pub(crate) fn advance(&mut self, mut n: u64) {
        self.written += n;
        while n > 0 {
            let Some(seg) = self.segments.get(self.cursor) else {
                return;
            };
            let left = seg.len() - self.cursor_offset;
            if n < left {
                self.cursor_offset += n;
                return;
            }
            n -= left;
            self.cursor += 1;
            self.cursor_offset = 0;
        }
    }

    /// The queued responses with the bytes of each that were written (all of them
    /// after a complete flush, a prefix after an abort), then empties the queue.
    pub(crate) fn drain_written(&mut self, mut each: impl FnMut(&Queued, &[u8], u64)) {
        let mut written = self.written.saturating_sub(self.interim);
        for q in &self.queued {
            let total = q.head_len + q.body_len;
            let sent = written.min(total);
            written -= sent;
            let text = (q.log.as_ref()).map_or(&[][..], |l| &self.log_text[l.text.clone()]);
            each(q, text, sent.saturating_sub(q.head_len));
        }
        self.reset();
    }

    /// Empties the queue, keeping its memory for the next batch.
    pub(crate) fn reset(&mut self) {
        self.heads.clear();
        self.segments.clear();
        self.queued.clear();
        self.log_text.clear();
        self.cursor = 0;
        self.cursor_offset = 0;
        self.written = 0;
        self.interim = 0;
    }

    /// Memory held, to decide whether it is worth pooling.
    pub(crate) fn capacity(&self) -> usize {
        self.heads.capacity() + self.log_text.capacity()
    }
}

/// The body of a queued response.
#[derive(Debug)]
pub(crate) enum Body {
    /// No body (HEAD, 304, or an empty file).
    Empty,
    /// Bytes already appended to the head buffer (generated error pages).
    Heads(Range<usize>),
    /// Shared bytes.
    Bytes(Bytes),
    /// A file range for `sendfile`.
    File {
        fd: Arc<File>,
        offset: u64,
        len: u64,
    },
    /// Several parts, in order (a dynamic page: wrapper, file, trailer).
    Parts(Vec<Body>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GET of the first site, begun now.
    fn tally() -> Tally {
        Tally {
            method: crate::metrics::Method::Get,
            site: 0,
            started: std::time::Instant::now(),
        }
    }

    fn iov_bytes(out: &Output) -> (Vec<u8>, bool) {
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let (n, file_next) = out.fill_iovecs(&mut iov);
        (
            iov[..n].iter().flat_map(|s| s.iter().copied()).collect(),
            file_next,
        )
    }

    #[test]
    fn heads_merge_and_partial_writes_resume() {
        let mut out = Output::default();
        for body in [&b"one"[..], b"two"] {
            let start = out.heads_mut().len();
            out.heads_mut().extend_from_slice(b"HEAD|");
            let head = start..out.heads_mut().len();
            out.push(
                (200, tally()),
                head,
                Body::Bytes(Bytes::copy_from_slice(body)),
                None,
            );
        }
        assert_eq!(iov_bytes(&out), (b"HEAD|oneHEAD|two".to_vec(), false));
        out.advance(7);
        assert_eq!(iov_bytes(&out), (b"eHEAD|two".to_vec(), false));
        out.advance(9);
        assert!(out.is_done());
        let mut seen = Vec::new();
        out.drain_written(|q, _, body| seen.push((q.status, body)));
        assert_eq!(seen, vec![(200, 3), (200, 3)]);
        assert_eq!(out.responses(), 0);
    }

    #[test]
    fn plaintext_batches_read_files_into_the_scratch_buffer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("file");
        std::fs::write(&path, b"0123456789").expect("write");
        let fd = Arc::new(File::open(&path).expect("open"));
        let mut out = Output::default();
        out.heads_mut().extend_from_slice(b"HEAD|");
        let body = Body::Parts(vec![
            Body::Bytes(Bytes::from_static(b"<")),
            Body::File {
                fd,
                offset: 2,
                len: 6,
            },
            Body::Bytes(Bytes::from_static(b">")),
        ]);
        out.push((200, tally()), 0..5, body, None);
        let mut scratch = [0u8; 4];
        let mut batch = |out: &Output, budget| {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out
                .gather_plaintext(&mut iov, &mut scratch, budget)
                .expect("gather");
            iov[..n]
                .iter()
                .flat_map(|s| s.iter().copied())
                .collect::<Vec<u8>>()
        };
        // The budget cuts a memory segment; the scratch size cuts the file.
        assert_eq!(batch(&out, 3), b"HEA");
        out.advance(3);
        assert_eq!(batch(&out, 100), b"D|<2345");
        out.advance(7);
        assert_eq!(batch(&out, 100), b"67>");
        out.advance(3);
        assert!(out.is_done());

        // A whole file and what follows it go in one batch; a second file waits.
        let fd = Arc::new(File::open(&path).expect("open"));
        let file = |offset| Body::File {
            fd: Arc::clone(&fd),
            offset,
            len: 2,
        };
        out.reset();
        out.push(
            (200, tally()),
            0..0,
            Body::Parts(vec![
                file(0),
                Body::Bytes(Bytes::from_static(b"|")),
                file(8),
            ]),
            None,
        );
        assert_eq!(batch(&out, 100), b"01|");
        out.advance(3);
        assert_eq!(batch(&out, 100), b"89");
    }

    #[test]
    fn aborted_flush_accounts_bytes_per_response() {
        let mut out = Output::default();
        for _ in 0..3 {
            let start = out.heads_mut().len();
            out.heads_mut().extend_from_slice(b"12345");
            let head = start..out.heads_mut().len();
            out.push(
                (200, tally()),
                head,
                Body::Bytes(Bytes::from_static(b"abcdefghij")),
                None,
            );
        }
        out.advance(5 + 10 + 5 + 4);
        let mut seen = Vec::new();
        out.drain_written(|_, _, body| seen.push(body));
        assert_eq!(seen, vec![10, 4, 0]);
    }
}
