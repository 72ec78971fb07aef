use super::*;

fn name(s: &str) -> Domain {
    Domain::Name(s.to_owned())
}

fn ipv4(s: &str) -> Domain {
    Domain::Ipv4(s.parse().expect("test literal"))
}

/// Forward paths that parse: input, local part, domain, rest after `>`.
#[test]
fn forward_paths() {
    let cases: &[(&str, &str, Domain, &str)] = &[
        ("<user@example.com>", "user", name("example.com"), ""),
        (
            "<User.Name@Example.COM>",
            "User.Name",
            name("example.com"),
            "",
        ),
        ("<a+tag@x.org> SIZE=1", "a+tag", name("x.org"), " SIZE=1"),
        // Trailing dot: the DNS root, removed.
        ("<user@example.com.>", "user", name("example.com"), ""),
        // Source routes are accepted and stripped (RFC 5321 §C).
        ("<@ours:to@ext.example>", "to", name("ext.example"), ""),
        (
            "<@a.example,@b.example:to@c.example>",
            "to",
            name("c.example"),
            "",
        ),
        // Percent hack and bang paths stay in the local part: the domain is ours.
        (
            "<to%ext.example@ours.example>",
            "to%ext.example",
            name("ours.example"),
            "",
        ),
        (
            "<ext.example!to@ours.example>",
            "ext.example!to",
            name("ours.example"),
            "",
        ),
        ("<ext!to@[192.0.2.1]>", "ext!to", ipv4("192.0.2.1"), ""),
        // Quoted local parts: unquoted, the domain is what follows the closing quote.
        (
            "<\"to@ext.example\"@ours.example>",
            "to@ext.example",
            name("ours.example"),
            "",
        ),
        ("<\"to@ext\"@[192.0.2.1]>", "to@ext", ipv4("192.0.2.1"), ""),
        ("<\"to%ext\"@ours>", "to%ext", name("ours"), ""),
        ("<\"a b\"@x>", "a b", name("x"), ""),
        ("<\"a\\\"b\"@x>", "a\"b", name("x"), ""),
        ("<\"a>b\"@x>", "a>b", name("x"), ""),
        ("<\"plain\"@x>", "plain", name("x"), ""),
        // Address literals.
        ("<u@[192.0.2.1]>", "u", ipv4("192.0.2.1"), ""),
        (
            "<u@[IPv6:2001:db8::1]>",
            "u",
            Domain::Ipv6("2001:db8::1".parse().expect("test literal")),
            "",
        ),
        ("<u@[ipv6:::1]>", "u", Domain::Ipv6(Ipv6Addr::LOCALHOST), ""),
        ("<u@localhost>", "u", name("localhost"), ""),
        ("<u@a-b.c0>", "u", name("a-b.c0"), ""),
    ];
    for (input, local, domain, rest) in cases {
        let parsed = parse_forward_path(input.as_bytes());
        let Ok((ForwardPath::Mailbox(address), tail)) = parsed else {
            panic!("{input}: {parsed:?}");
        };
        assert_eq!(address.local(), *local, "{input}");
        assert_eq!(address.domain(), domain, "{input}");
        assert_eq!(tail, rest.as_bytes(), "{input}");
    }
}

#[test]
fn postmaster_and_null_paths() {
    for input in ["<postmaster>", "<Postmaster>", "<POSTMASTER>"] {
        let (path, rest) = parse_forward_path(input.as_bytes()).expect(input);
        assert_eq!(path, ForwardPath::Postmaster);
        assert!(rest.is_empty());
    }
    // With a domain it is an ordinary mailbox.
    let (path, _) = parse_forward_path(b"<postmaster@x.org>").expect("mailbox");
    assert!(matches!(path, ForwardPath::Mailbox(a) if a.local() == "postmaster"));
    let (path, rest) = parse_reverse_path(b"<> BODY=8BITMIME").expect("null");
    assert_eq!(path, ReversePath::Null);
    assert_eq!(rest, b" BODY=8BITMIME");
    // `<>` is not a forward path.
    assert!(parse_forward_path(b"<>").is_err());
}

#[test]
fn refused_paths() {
    use AddressError::*;
    let cases: &[(&str, AddressError)] = &[
        ("user@example.com", MissingBrackets),
        ("<user@example.com", MissingBrackets),
        ("<user@example.com x>", BadDomain),
        // No domain: bang paths and bare quoted strings are not mailboxes.
        ("<ext!to>", MissingDomain),
        ("<\"to@ext\">", MissingDomain),
        ("<user>", MissingDomain),
        ("<user@>", BadDomain),
        // `@` in the domain: `to@ext@[ip]` is not a mailbox.
        ("<to@ext@[192.0.2.1]>", BadDomain),
        ("<to@ext@ours>", BadDomain),
        ("<@ours:to>", MissingDomain),
        ("<@ours to@x>", BadSourceRoute),
        ("<@:to@x>", BadSourceRoute),
        ("<@a,b:to@x>", BadSourceRoute),
        ("<@a_b:to@x>", BadSourceRoute),
        // Local parts.
        ("<@x>", BadSourceRoute),
        ("<.user@x>", BadLocalPart),
        ("<user.@x>", BadLocalPart),
        ("<us..er@x>", BadLocalPart),
        ("<us er@x>", BadLocalPart),
        ("<us(er@x>", BadLocalPart),
        ("<\"\"@x>", BadLocalPart),
        ("<\"abc@x>", BadLocalPart),
        ("<\"a\tb\"@x>", BadLocalPart),
        ("<\"a\\\u{7f}\"@x>", BadLocalPart),
        // Domains.
        ("<u@example.com..>", BadDomain),
        ("<u@.example.com>", BadDomain),
        ("<u@ex..ample>", BadDomain),
        ("<u@-example.com>", BadDomain),
        ("<u@example-.com>", BadDomain),
        ("<u@exa_mple.com>", BadDomain),
        ("<u@exa%mple.com>", BadDomain),
        ("<u@.>", BadDomain),
        ("<u@[192.0.2.256]>", BadAddressLiteral),
        ("<u@[192.0.2.1>", BadAddressLiteral),
        ("<u@[01.2.3.4]>", BadAddressLiteral),
        ("<u@[IPv6:1.2.3.4.5]>", BadAddressLiteral),
        ("<u@[x-tag:stuff]>", UnsupportedAddressLiteral),
        ("<u@[192.0.2.1].com>", MissingBrackets),
        ("<ü@x>", NonAscii),
        ("<u@ü.example>", NonAscii),
    ];
    for (input, error) in cases {
        let got = parse_forward_path(input.as_bytes()).map(|(p, _)| p);
        assert_eq!(got, Err(*error), "{input}");
    }
}

#[test]
fn domain_limits() {
    let label = "a".repeat(63);
    assert!(Domain::parse(&format!("{label}.com")).is_ok());
    assert_eq!(
        Domain::parse(&format!("{label}a.com")),
        Err(AddressError::BadDomain)
    );
    let long = vec!["abcdefghi"; 25].join(".");
    assert_eq!(long.len(), 249);
    assert!(Domain::parse(&long).is_ok());
    let too_long = vec!["abcdefghi"; 26].join(".");
    assert_eq!(Domain::parse(&too_long), Err(AddressError::BadDomain));
    assert_eq!(Domain::parse("EXAMPLE.org."), Ok(name("example.org")));
}

#[test]
fn display_requotes_when_needed() {
    let cases = [
        ("<\"plain\"@X.org>", "plain@x.org"),
        ("<\"a b\"@x>", "\"a b\"@x"),
        ("<\"to@ext\"@ours>", "\"to@ext\"@ours"),
        ("<\"a\\\"b\"@x>", "\"a\\\"b\"@x"),
        ("<u@[192.0.2.1]>", "u@[192.0.2.1]"),
        ("<u@[IPv6:2001:DB8::1]>", "u@[IPv6:2001:db8::1]"),
        ("<@r:u@x.>", "u@x"),
    ];
    for (input, shown) in cases {
        let (path, _) = parse_forward_path(input.as_bytes()).expect(input);
        let ForwardPath::Mailbox(address) = path else {
            panic!("{input}")
        };
        assert_eq!(address.to_string(), shown, "{input}");
        // What is shown parses back to the same address.
        assert_eq!(Address::parse(shown), Ok(address), "{input}");
    }
}

#[test]
fn routing_syntax_flag() {
    for (text, flagged) in [
        ("to%ext@ours", true),
        ("ext!to@ours", true),
        ("\"to@ext\"@ours", true),
        ("to+tag@ours", false),
        ("first.last@ours", false),
    ] {
        let address = Address::parse(text).expect(text);
        assert_eq!(address.has_routing_syntax(), flagged, "{text}");
    }
}

#[test]
fn bare_address_parse() {
    assert!(Address::parse("user@example.com").is_ok());
    assert_eq!(
        Address::parse("user@example.com>"),
        Err(AddressError::BadDomain)
    );
    assert_eq!(Address::parse("user"), Err(AddressError::MissingDomain));
    assert_eq!(Address::parse(""), Err(AddressError::BadLocalPart));
}
