//! The SPECweb99 file set (`web99.md` §2): how many directories a load needs, the 36
//! files of each, and the exact bytes of every file, as `wafgen99` wrote them.
//!
//! A file is a header line (`"%9d %s\n"`: size and relative name) followed by a body
//! of 64-byte lines: random printable bytes (`!`..`|`), a newline at every offset
//! ≡ 63 (mod 64), and at every offset ≡ 0 (mod 4096) a *marker*: the next character
//! of the file's name, cycling. Class 1 files carry one custom-ad tag, class 2 files
//! two, each right after a marker and exactly one line long, so the server can
//! rewrite the ad in place (§6.3). The random bytes need not match the original kit
//! (the client checks the header line and the length); this module makes them
//! deterministic per file and seed so a file set can be regenerated identically.

use std::fmt;

/// Emulated line speed of one SPECweb99 connection, bits per second (the kit's
/// `USER_LINE_SPEED`).
pub const USER_LINE_SPEED: f64 = 400_000.0;
/// The manager's "average size of reply per SPECweb99 request", in bits.
pub const AVERAGE_REPLY_BITS: f64 = 122_000.0;
/// The manager's `MB_PER_DIRECTORY`, used for the reported "Fileset Size (MB)".
pub const MB_PER_DIRECTORY: f64 = 4.88;
/// Base size of each class; file `F` of class `C` has `BASE[C] * (F + 1) / 10` bytes.
pub const CLASS_BASE: [u64; 4] = [1024, 10_240, 102_400, 1_024_000];
/// Files per class.
pub const FILES_PER_CLASS: u8 = 9;
/// Bytes in one directory: 4,604 + 46,080 + 460,800 + 4,608,000.
pub const DIRECTORY_BYTES: u64 = 5_119_484;
/// The custom-ad tag as stored in the file set, placeholders included (62 bytes);
/// a newline follows it.
pub const CAD_TAG: &[u8; 62] = b"<!WEB99CAD><IMG SRC=\"/file_set/dirNNNNN/classX_Y\"><!/WEB99CAD>";
/// Offsets within [`CAD_TAG`] of the directory digits, the class and the file number.
pub const CAD_DIR_OFFSET: usize = 34;
/// Offset of the class digit in [`CAD_TAG`].
pub const CAD_CLASS_OFFSET: usize = 45;
/// Offset of the file digit in [`CAD_TAG`].
pub const CAD_FILE_OFFSET: usize = 47;

const LINE: usize = 64;
const MARKER_EVERY: usize = 4096;
const PRINTABLE: std::ops::RangeInclusive<u8> = b'!'..=b'|';

/// Directories needed for `connections` simultaneous connections (the manager's
/// `dirs_from_load`): `int(25 + (400000 / 122000 × connections) / 5)`.
pub fn directories(connections: u32) -> u32 {
    let ops_per_sec = USER_LINE_SPEED / AVERAGE_REPLY_BITS * f64::from(connections);
    (25.0 + ops_per_sec / 5.0) as u32
}

/// The "Fileset Size (MB)" a result page shows for `directories`.
pub fn fileset_mb(directories: u32) -> f64 {
    MB_PER_DIRECTORY * f64::from(directories)
}

/// One file of the set: `file_set/dirNNNNN/classC_F`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Directory number.
    pub dir: u32,
    /// Class, 0 to 3.
    pub class: u8,
    /// File number within the class, 0 to 8.
    pub num: u8,
}

impl FileId {
    /// The 36 files of directory `dir`, class by class.
    pub fn all_in(dir: u32) -> impl Iterator<Item = FileId> {
        (0..4u8)
            .flat_map(move |class| (0..FILES_PER_CLASS).map(move |num| FileId { dir, class, num }))
    }

    /// Size in bytes.
    pub fn size(self) -> u64 {
        CLASS_BASE[usize::from(self.class & 3)] * (u64::from(self.num) + 1) / 10
    }

    /// Custom-ad tags in the file: one in class 1, two in class 2.
    pub fn tags(self) -> usize {
        match self.class {
            1 => 1,
            2 => 2,
            _ => 0,
        }
    }

    /// The directory's name, `dirNNNNN`.
    pub fn dir_name(self) -> String {
        format!("dir{:05}", self.dir)
    }

    /// The file's name within its directory, `classC_F`.
    pub fn file_name(self) -> String {
        format!("class{}_{}", self.class, self.num)
    }
}

impl fmt::Display for FileId {
    /// `file_set/dirNNNNN/classC_F`, the name in the header line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "file_set/dir{:05}/class{}_{}",
            self.dir, self.class, self.num
        )
    }
}

/// The header line of a file: size right-aligned in 9 columns, its name, newline.
pub fn header_line(id: FileId) -> String {
    format!("{:>9} {id}\n", id.size())
}

/// Body offsets of the markers after which tags go: one per slice when the
/// eligible markers (those followed by a whole line) are cut into `tags` slices.
fn tag_markers(id: FileId, body_len: usize, rng: &mut fastrand::Rng) -> Vec<usize> {
    let eligible: Vec<usize> = (0..body_len)
        .step_by(MARKER_EVERY)
        .filter(|&m| m + LINE <= body_len)
        .collect();
    let tags = id.tags().min(eligible.len());
    (0..tags)
        .map(|t| {
            let (from, to) = (eligible.len() * t / tags, eligible.len() * (t + 1) / tags);
            eligible[rng.usize(from..to)]
        })
        .collect()
}

/// Writes the contents of `id` into `out` (cleared first). The same `seed` gives
/// the same bytes.
pub fn generate(id: FileId, seed: u64, out: &mut Vec<u8>) {
    let mut rng = fastrand::Rng::with_seed(
        seed ^ (u64::from(id.dir) << 16 | u64::from(id.class) << 8 | u64::from(id.num)),
    );
    out.clear();
    out.extend_from_slice(header_line(id).as_bytes());
    let name = id.to_string().into_bytes();
    let body_len = id.size() as usize - out.len();
    let tags = tag_markers(id, body_len, &mut rng);
    let mut markers_seen = 0;
    let mut i = 0;
    while i < body_len {
        if i % MARKER_EVERY == 0 {
            out.push(name[markers_seen % name.len()]);
            markers_seen += 1;
            i += 1;
            if tags.contains(&(i - 1)) {
                out.extend_from_slice(CAD_TAG);
                out.push(b'\n');
                i += LINE - 1;
            }
        } else if i % LINE == LINE - 1 {
            out.push(b'\n');
            i += 1;
        } else {
            out.push(rng.u8(PRINTABLE));
            i += 1;
        }
    }
}

/// Why a file is not what the file set says it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Invalid {
    /// Wrong length.
    Size {
        /// Expected bytes.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// The header line is not `"%9d file_set/dirNNNNN/classC_F\n"`.
    Header,
    /// A marker, newline or body byte is wrong at this offset of the file.
    Byte(usize),
    /// A malformed custom-ad tag starts at this offset.
    Tag(usize),
    /// The number of custom-ad tags is wrong.
    TagCount {
        /// Expected tags.
        expected: usize,
        /// Tags found.
        found: usize,
    },
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::Size { expected, found } => write!(f, "{found} bytes, expected {expected}"),
            Invalid::Header => f.write_str("wrong header line"),
            Invalid::Byte(at) => write!(f, "unexpected byte at offset {at}"),
            Invalid::Tag(at) => write!(f, "malformed custom-ad tag at offset {at}"),
            Invalid::TagCount { expected, found } => {
                write!(f, "{found} custom-ad tags, expected {expected}")
            }
        }
    }
}

impl std::error::Error for Invalid {}

/// Checks every byte of `data` against the structure of `id`: length, header
/// line, markers, line breaks, the printable range, and the ad tags.
pub fn verify(id: FileId, data: &[u8]) -> Result<(), Invalid> {
    let expected = id.size();
    if data.len() as u64 != expected {
        return Err(Invalid::Size {
            expected,
            found: data.len() as u64,
        });
    }
    let header = header_line(id);
    let Some(body) = data.strip_prefix(header.as_bytes()) else {
        return Err(Invalid::Header);
    };
    let name = id.to_string().into_bytes();
    let (mut i, mut markers, mut tags) = (0, 0, 0);
    while i < body.len() {
        let at = header.len() + i;
        if i % MARKER_EVERY == 0 {
            if body[i] != name[markers % name.len()] {
                return Err(Invalid::Byte(at));
            }
            markers += 1;
            i += 1;
            if body[i..].starts_with(&CAD_TAG[..11]) {
                if !body[i..].starts_with(CAD_TAG) || body.get(i + CAD_TAG.len()) != Some(&b'\n') {
                    return Err(Invalid::Tag(at + 1));
                }
                tags += 1;
                i += LINE - 1;
            }
            continue;
        }
        let ok = if i % LINE == LINE - 1 {
            body[i] == b'\n'
        } else {
            PRINTABLE.contains(&body[i])
        };
        if !ok {
            return Err(Invalid::Byte(at));
        }
        i += 1;
    }
    if tags != id.tags() {
        return Err(Invalid::TagCount {
            expected: id.tags(),
            found: tags,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
