use super::*;
use crate::fileset::{self, CAD_TAG, FileId};

/// The validation Reset of the manager: `pttime=100&maxthread=100&exp=1,100`.
fn params() -> ResetParams {
    ResetParams {
        maxload: 100,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    }
}

#[test]
fn ad_54_matches_the_record_quoted_in_the_tux_source() {
    // web99.md §6.4: `   54 24808100    97F61  75  952393980`, expiration = now + 2 × pttime.
    let ads = generate_ads(&params(), 952_393_980 - 200);
    let file = custom_ads(&ads);
    let line = file.lines().nth(54).expect("ad 54");
    assert_eq!(line, "   54 24808100    97F61  75  952393980");
    assert_eq!(file.len(), 360 * AD_RECORD);
    assert!(file.lines().all(|l| l.len() + 1 == AD_RECORD));
}

#[test]
fn user_records_have_the_fixed_width_format() {
    let text = user_personality(&ResetParams {
        maxload: 50,
        maxthread: 120,
        ..params()
    });
    assert_eq!(text.len(), 120 * USER_RECORD);
    let users = parse_users(&text).expect("parses");
    assert_eq!(users.len(), 120);
    for (i, line) in text.lines().enumerate() {
        assert_eq!(line.len() + 1, USER_RECORD);
        let dem = users[i];
        // One bit in each demographic group.
        for mask in [GENDER, AGE, REGION, INTEREST1, INTEREST2] {
            assert_eq!((dem & mask).count_ones(), 1, "user {i} mask {mask:X}");
        }
    }
    assert!(text.starts_with("    0 "));
}

#[test]
fn universal_and_expired_ads() {
    let now = 1_000_000_000;
    let ads = generate_ads(
        &ResetParams {
            expired: [350, 10],
            ..params()
        },
        now,
    );
    let ts = now + 200;
    for (j, ad) in ads.iter().enumerate() {
        let j = j as u32;
        let universal = j % 24 == 100 % 24;
        assert_eq!(ad.minmatch, if universal { 1 } else { 75 }, "ad {j}");
        let expired = (350..360).contains(&j) || j < 14 || (10..34).contains(&j);
        let expected = if expired { ts - EXPIRED_AGO } else { ts };
        assert_eq!(ad.expiration, expected, "ad {j}");
    }
    assert_eq!(parse_ads(&custom_ads(&ads)), Some(ads));
    assert_eq!(parse_ads("    0 1 2 3 4\n"), None);
}

#[test]
fn every_user_finds_an_ad_within_24_steps() {
    let p = params();
    let ads = generate_ads(&p, 0);
    let users = parse_users(&user_personality(&p)).expect("users");
    for (u, &dem) in users.iter().enumerate() {
        for last in [0, 20, 359, (u as u32 * 7) % 360] {
            let found = find_ad(dem, last, &ads, 0).expect("a match");
            let steps = (found.ad + 360 - last) % 360;
            assert!((1..=24).contains(&steps), "user {u} last {last}: {found:?}");
            assert!(found.weight <= 75 && found.weight >= ads[found.ad as usize].minmatch);
        }
    }
}

#[test]
fn expiry_is_reported() {
    let ads = generate_ads(&params(), 0);
    let user = demographics(3, false);
    // Ads 1..25 are expired (exp=1); searching from ad 0 lands on a universal ad.
    let found = find_ad(user, 0, &ads, 500).expect("match");
    let expired = (1..25).contains(&found.ad) || (100..124).contains(&found.ad);
    assert_eq!(found.expired, expired, "{found:?}");
    let live = find_ad(user, 200, &ads, 0).expect("match");
    assert!(!live.expired);
}

#[test]
fn tags_are_rewritten_in_place() {
    let id = FileId {
        dir: 0,
        class: 2,
        num: 5,
    };
    let mut file = Vec::new();
    fileset::generate(id, 1, &mut file);
    let before = file.clone();
    rewrite_tags(&mut file, 54);
    assert_eq!(file.len(), before.len());
    let expected = b"<!WEB99CAD><IMG SRC=\"/file_set/dir00001/class2_0\"><!/WEB99CAD>";
    let count = file
        .windows(expected.len())
        .filter(|w| w == expected)
        .count();
    assert_eq!(count, 2);
    assert_eq!(
        file.windows(CAD_TAG.len()).filter(|w| w == CAD_TAG).count(),
        0
    );
    let changed = file.iter().zip(&before).filter(|(a, b)| a != b).count();
    assert!(
        changed <= 2 * 7,
        "only the placeholders change ({changed} bytes)"
    );
    // 359 → dir00009, class (359 % 36) / 9 = 3, file 359 % 9 = 8.
    rewrite_tags(&mut file, 359);
    assert!(
        file.windows(27)
            .any(|w| w == b"/file_set/dir00009/class3_8")
    );
}
