use super::*;

/// Made by Dovecot 2.3 here: `doveadm pw -s SCHEME -p x` (and `-p 'a b:c'` for
/// the plain one).
const DOVEADM: [(&str, &str); 5] = [
    (
        "x",
        "{BLF-CRYPT}$2y$05$HfisMuHYg0KqyogGvXPtsOwcKW754JhDnA7c2NMTrWqWiibvCugVy",
    ),
    (
        "x",
        "{SHA512-CRYPT}$6$/kxZKEhU2V2e3R8B$Op.DA0BwbyTcYXKBRFpTxfWk6Lu6JRMXkSNF7ncS8eLNvXRSOv/\
         RzxBobR9YzbXc4hGyWN.9Bdkeqr7KTNDPQ0",
    ),
    (
        "x",
        "{ARGON2ID}$argon2id$v=19$m=65536,t=3,p=1$YqOyKbRfX+kFRQu04mF2xg$\
         10qoXGIR2WDPPntFMpDGGgV8ao0FrZoqMAHgBzLJ/NM",
    ),
    ("x", "{SSHA}CU+OkCQnDf5hcYEy4/SBUTmLGVNoDGpD"),
    ("a b:c", "{PLAIN.BASE64}YSBiOmM="),
];

#[test]
fn every_scheme_round_trips_and_refuses_a_wrong_password() {
    for scheme in Scheme::ALL {
        let value = hash("s3cret pw", scheme, &Cost::MINIMUM).expect("hash");
        let tag = format!("{{{}", scheme.dovecot_name());
        assert!(value.starts_with(&tag), "{value}");
        assert_eq!(scheme_of(&value), Some(scheme), "{value}");
        assert!(is_valid(&value), "{value}");
        assert!(!value.contains([' ', ':', '\n']), "{value}");
        assert!(verify("s3cret pw", &value, true), "{value}");
        for wrong in ["s3cret pW", "s3cret pw ", "", "s3cret"] {
            assert!(!verify(wrong, &value, true), "{wrong:?} against {value}");
        }
        // Salted (but plain): the same password gives another value.
        if scheme != Scheme::Plain {
            assert_ne!(
                value,
                hash("s3cret pw", scheme, &Cost::MINIMUM).expect("hash")
            );
        }
    }
}

#[test]
fn new_values_look_like_dovecots() {
    let cost = Cost::default();
    let sha = hash("pw", Scheme::Sha512Crypt, &cost).expect("sha512-crypt");
    // $6$, 16 salt characters, no rounds= (the default 5,000), 86 hash characters.
    let fields: Vec<&str> = sha.split('$').collect();
    assert_eq!(fields[..2], ["{SHA512-CRYPT}", "6"], "{sha}");
    assert_eq!(
        (fields[2].len(), fields[3].len(), fields.len()),
        (16, 86, 4)
    );
    let bcrypt = hash("pw", Scheme::BlfCrypt, &Cost::MINIMUM).expect("bcrypt");
    assert!(bcrypt.starts_with("{BLF-CRYPT}$2y$04$"), "{bcrypt}");
    assert_eq!(bcrypt.len(), "{BLF-CRYPT}".len() + 60);
    let argon = hash("pw", Scheme::Argon2id, &Cost::MINIMUM).expect("argon2id");
    assert!(
        argon.starts_with("{ARGON2ID}$argon2id$v=19$m=8,t=1,p=1$"),
        "{argon}"
    );
    // 20 digest bytes and 4 salt bytes: 32 base64 characters, as doveadm's.
    let ssha = hash("pw", Scheme::Ssha, &cost).expect("ssha");
    assert_eq!(ssha.len(), "{SSHA}".len() + 32, "{ssha}");
    assert_eq!(
        hash("a b:c", Scheme::Plain, &cost).expect("plain"),
        "{PLAIN.BASE64}YSBiOmM="
    );
    let too_cheap = Cost {
        bcrypt: 3,
        ..Cost::MINIMUM
    };
    assert!(matches!(
        hash("pw", Scheme::BlfCrypt, &too_cheap),
        Err(Error::Hashing(_))
    ));
}

#[test]
fn dovecots_own_values_verify() {
    for (password, value) in DOVEADM {
        assert!(is_valid(value), "{value}");
        assert!(verify(password, value, true), "{value}");
        assert!(!verify("y", value, true), "{value}");
    }
    // slappasswd -h {SSHA} -s secret: an 8-byte salt.
    assert!(verify(
        "secret",
        "{SSHA}r8lTTRxNjuJrCxbT9Dr3/0RnQu/eRC8m",
        false
    ));
}

#[test]
fn plain_text_only_where_allowed() {
    for value in [
        "{PLAIN}pw",
        "{plain.b64}cHc=",
        "{CLEARTEXT}pw",
        "{PLAIN.HEX}7077",
    ] {
        assert_eq!(scheme_of(value), Some(Scheme::Plain), "{value}");
        assert!(verify("pw", value, true), "{value}");
        assert!(!verify("pw", value, false), "{value}");
        assert!(!verify("pW", value, true), "{value}");
    }
    assert!(!is_valid("{PLAIN.HEX}707"));
    assert!(!is_valid("{PLAIN.BASE64}not base64!"));
    assert_eq!(scheme_of("{PLAIN.ROT13}pw"), None);
}

#[test]
fn scheme_names_in_any_case() {
    for (text, scheme) in [
        ("argon2id", Scheme::Argon2id),
        ("ARGON2ID", Scheme::Argon2id),
        ("{Argon2id}", Scheme::Argon2id),
        ("sha512-crypt", Scheme::Sha512Crypt),
        ("SHA512-CRYPT", Scheme::Sha512Crypt),
        ("blf-crypt", Scheme::BlfCrypt),
        ("bcrypt", Scheme::BlfCrypt),
        ("Ssha", Scheme::Ssha),
        ("PLAIN", Scheme::Plain),
    ] {
        assert_eq!(text.parse::<Scheme>().expect(text), scheme);
    }
    for bad in ["", "md5", "sha512", "{sha512-crypt", "des-crypt"] {
        assert!(
            matches!(bad.parse::<Scheme>(), Err(Error::UnknownScheme(_))),
            "{bad}"
        );
    }
    for scheme in Scheme::ALL {
        assert_eq!(scheme.name().parse::<Scheme>().expect("name"), scheme);
        assert_eq!(
            scheme.dovecot_name().parse::<Scheme>().expect("name"),
            scheme
        );
    }
    // Tags too.
    let value = hash("pw", Scheme::Sha512Crypt, &Cost::MINIMUM).expect("hash");
    let lower = value.replacen("{SHA512-CRYPT}", "{sha512-crypt}", 1);
    assert!(verify("pw", &lower, false));
}

#[test]
fn rfc_3112_spellings() {
    use sha_crypt::PasswordHasher as _;
    let sha = sha_crypt::ShaCrypt::default()
        .hash_password_with_salt(b"pw", b"saltsalt")
        .expect("sha-crypt");
    let value = format!("{{CRYPT}}{}", sha.as_str());
    assert!(value.starts_with("{CRYPT}$6$rounds=5000$"), "{value}");
    assert!(is_valid(&value), "{value}");
    assert!(verify("pw", &value, false));
    assert!(!verify("pW", &value, false));
    let bc = format!("{{CRYPT}}{}", bcrypt::hash("pw", 4).expect("bcrypt"));
    assert!(verify("pw", &bc, false));
    assert!(!verify("px", &bc, false));
    let argon = password::hash_password("pw", &PasswordCost::MINIMUM).expect("a");
    assert!(verify("pw", &format!("{{ARGON2}}{argon}"), false));
    assert!(!verify("p", &format!("{{argon2}}{argon}"), false));
}

#[test]
fn ldap_forms() {
    let cost = Cost::MINIMUM;
    for (scheme, tag) in [
        (Scheme::Argon2id, "{ARGON2}$argon2id$"),
        (Scheme::Sha512Crypt, "{CRYPT}$6$"),
        (Scheme::BlfCrypt, "{CRYPT}$2y$"),
        (Scheme::Ssha, "{SSHA}"),
    ] {
        let value = hash("pw", scheme, &cost).expect("hash");
        let ldap = ldap_value(&value).expect("an LDAP form");
        assert!(ldap.starts_with(tag), "{ldap}");
        assert!(verify("pw", &ldap, false), "{ldap}");
        assert_eq!(
            value.split_once('}').map(|p| p.1),
            ldap.split_once('}').map(|p| p.1)
        );
    }
    assert_eq!(ldap_value("{PLAIN.BASE64}cHc="), None);
    assert_eq!(ldap_value("{MD5}x"), None);
}

#[test]
fn old_bare_argon2_values_normalise() {
    let phc = password::hash_password("pw", &PasswordCost::MINIMUM).expect("hash");
    let stored = normalize(&phc).expect("argon2");
    assert_eq!(stored, format!("{{ARGON2ID}}{phc}"));
    assert!(verify("pw", &stored, false));
    assert_eq!(normalize(&stored).as_deref(), Some(stored.as_str()));
    assert_eq!(normalize("pw"), None);
    assert_eq!(normalize("{MD5}x"), None);
}

#[test]
fn unknown_and_malformed_values_never_match() {
    for value in [
        "pw",
        "{CRYPT}abJnggxhB/yWI",
        "{MD5}8BZw8aBqDbEUpf+wpw/NZQ==",
        "{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=",
        "{SSHA}",
        "{SSHA}not base64!",
        "{SSHA}cHc=",
        "{ARGON2}plain",
        "{ARGON2ID}$argon2id$v=19$broken",
        "{CRYPT}$6$broken",
        "{SHA512-CRYPT}$6$salt$short",
        "{SHA512-CRYPT}$2y$05$HfisMuHYg0KqyogGvXPtsOwcKW754JhDnA7c2NMTrWqWiibvCugVy",
        "{BLF-CRYPT}$6$salt",
        "{BLF-CRYPT}$2y$05$short",
        "{BLF-CRYPT}$2y$99$HfisMuHYg0KqyogGvXPtsOwcKW754JhDnA7c2NMTrWqWiibvCugVy",
        "{SHA512-CRYPT",
        "",
    ] {
        assert!(!verify("pw", value, true), "{value}");
        assert!(!is_valid(value), "{value}");
    }
}
