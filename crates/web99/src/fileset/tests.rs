use super::*;

#[test]
fn directory_counts_match_published_results() {
    // web99.md §2.1: 988, 3420 and 8120 connections are published results.
    for (connections, dirs, mb) in [
        (10, 31, 151.28),
        (100, 90, 439.2),
        (988, 672, 3279.36),
        (3420, 2267, 11062.96),
        (8120, 5349, 26103.12),
    ] {
        assert_eq!(directories(connections), dirs, "{connections}");
        assert!((fileset_mb(dirs) - mb).abs() < 1e-6, "{connections}");
    }
}

#[test]
fn sizes_follow_the_class_table() {
    let class0: Vec<u64> = (0..9)
        .map(|num| {
            FileId {
                dir: 0,
                class: 0,
                num,
            }
            .size()
        })
        .collect();
    assert_eq!(class0, [102, 204, 307, 409, 512, 614, 716, 819, 921]);
    assert_eq!(
        FileId {
            dir: 0,
            class: 3,
            num: 8
        }
        .size(),
        921_600
    );
    let total: u64 = FileId::all_in(7).map(FileId::size).sum();
    assert_eq!(total, DIRECTORY_BYTES);
    assert_eq!(FileId::all_in(7).count(), 36);
}

#[test]
fn header_and_names() {
    let id = FileId {
        dir: 0,
        class: 1,
        num: 0,
    };
    assert_eq!(header_line(id), "     1024 file_set/dir00000/class1_0\n");
    assert_eq!(header_line(id).len(), 37);
    assert_eq!(
        FileId {
            dir: 671,
            class: 3,
            num: 8
        }
        .to_string(),
        "file_set/dir00671/class3_8"
    );
    assert_eq!(id.dir_name(), "dir00000");
    assert_eq!(id.file_name(), "class1_0");
}

#[test]
fn every_file_of_a_directory_is_generated_valid() {
    let mut buf = Vec::new();
    for id in FileId::all_in(12) {
        generate(id, 99, &mut buf);
        assert_eq!(buf.len() as u64, id.size(), "{id}");
        verify(id, &buf).unwrap_or_else(|e| panic!("{id}: {e}"));
        let tags = buf.windows(CAD_TAG.len()).filter(|w| w == CAD_TAG).count();
        assert_eq!(tags, id.tags(), "{id}");
    }
}

#[test]
fn layout_of_a_small_class1_file() {
    // The real class1_0 sample: marker `f`, then the tag right away.
    let id = FileId {
        dir: 0,
        class: 1,
        num: 0,
    };
    let mut buf = Vec::new();
    generate(id, 1, &mut buf);
    let body = &buf[37..];
    assert_eq!(body[0], b'f');
    assert_eq!(&body[1..63], CAD_TAG);
    assert_eq!(body[63], b'\n');
    for (i, &b) in body.iter().enumerate().skip(64) {
        if i % 64 == 63 {
            assert_eq!(b, b'\n', "offset {i}");
        } else {
            assert!((b'!'..=b'|').contains(&b), "offset {i}");
        }
    }
}

#[test]
fn markers_cycle_through_the_name() {
    let id = FileId {
        dir: 3,
        class: 3,
        num: 0,
    };
    let mut buf = Vec::new();
    generate(id, 5, &mut buf);
    let body = &buf[header_line(id).len()..];
    let name = id.to_string();
    for (k, marker) in body.iter().step_by(4096).enumerate() {
        assert_eq!(*marker, name.as_bytes()[k % name.len()]);
    }
}

#[test]
fn generation_is_deterministic_per_seed() {
    let id = FileId {
        dir: 1,
        class: 2,
        num: 4,
    };
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    generate(id, 7, &mut a);
    generate(id, 7, &mut b);
    generate(id, 8, &mut c);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn corruption_is_detected() {
    let id = FileId {
        dir: 2,
        class: 2,
        num: 1,
    };
    let mut good = Vec::new();
    generate(id, 3, &mut good);

    let mut short = good.clone();
    short.pop();
    assert!(matches!(verify(id, &short), Err(Invalid::Size { .. })));

    let mut header = good.clone();
    header[0] = b'X';
    assert_eq!(verify(id, &header), Err(Invalid::Header));

    let mut newline = good.clone();
    let at = header_line(id).len() + 64 * 10 + 63;
    newline[at] = b'a';
    assert_eq!(verify(id, &newline), Err(Invalid::Byte(at)));

    let mut control = good.clone();
    let at = header_line(id).len() + 64 * 10 + 5;
    control[at] = 0;
    assert_eq!(verify(id, &control), Err(Invalid::Byte(at)));

    let mut untagged = good.clone();
    let tag = untagged
        .windows(CAD_TAG.len())
        .position(|w| w == CAD_TAG)
        .expect("a tag");
    untagged[tag + 12] = b'x';
    assert_eq!(verify(id, &untagged), Err(Invalid::Tag(tag)));

    assert_eq!(
        verify(
            FileId {
                dir: 2,
                class: 2,
                num: 1
            },
            &good
        ),
        Ok(()),
        "the original stays valid"
    );
}
