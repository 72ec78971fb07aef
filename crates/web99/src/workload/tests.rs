use std::collections::HashMap;

use super::*;

/// Pearson's χ² statistic of observed counts against expected probabilities.
fn chi2(observed: &[usize], probabilities: &[f64]) -> f64 {
    let n: usize = observed.iter().sum();
    observed
        .iter()
        .zip(probabilities)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

/// χ² critical values at p = 0.001 for the degrees of freedom used here.
fn critical(df: usize) -> f64 {
    match df {
        3 => 16.27,
        4 => 18.47,
        8 => 26.12,
        29 => 58.30,
        _ => panic!("no table entry for {df} degrees of freedom"),
    }
}

#[test]
fn park_miller_matches_the_minimal_standard() {
    // Park & Miller's check value: from seed 1, the 10,000th value is 1043618065.
    let mut rng = SpecRng::new(1);
    for _ in 0..9_999 {
        rng.next_f64();
    }
    let v = rng.next_f64();
    assert_eq!((v * 2_147_483_647.0).round() as i64, 1_043_618_065);
    assert_eq!(client_seed(0), 2331);
    assert_eq!(client_seed(3), 2331 + 768);
}

#[test]
fn zipf_table_probabilities() {
    let z = Zipf::new(9, 1.0);
    let h9 = 2.828_968;
    for k in 0..9 {
        let want = 1.0 / ((k + 1) as f64) / h9;
        assert!((z.probability(k) - want).abs() < 1e-6, "rank {k}");
    }
    let mut rng = SpecRng::new(7);
    let mut counts = [0usize; 9];
    for _ in 0..100_000 {
        counts[z.sample(&mut rng)] += 1;
    }
    let p: Vec<f64> = (0..9).map(|k| z.probability(k)).collect();
    assert!(chi2(&counts, &p) < critical(8), "{counts:?}");
}

#[test]
fn request_type_thresholds_give_the_published_mix() {
    let mut rng = SpecRng::new(11);
    let mut counts: HashMap<RequestType, usize> = HashMap::new();
    for _ in 0..400_000 {
        *counts
            .entry(RequestType::from_uniform(rng.next_f64()))
            .or_default() += 1;
    }
    let observed: Vec<usize> = RequestType::ALL.iter().map(|t| counts[t]).collect();
    let shares: Vec<f64> = RequestType::ALL.iter().map(|t| t.share()).collect();
    assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // §4.1: 70 %, 12.45 %, 0.15 %, 12.60 %, 4.80 %.
    for (t, want) in RequestType::ALL
        .iter()
        .zip([0.70, 0.1245, 0.0015, 0.126, 0.048])
    {
        assert!((t.share() - want).abs() < 1e-9, "{t:?}");
    }
    assert!(chi2(&observed, &shares) < critical(4), "{observed:?}");
}

#[test]
fn decks_have_exact_class_counts_and_the_spec_distributions() {
    assert_eq!(class_counts(1000), [350, 500, 140, 10]);
    assert_eq!(class_counts(100), [35, 50, 14, 1]);
    assert_eq!(class_counts(7).iter().sum::<usize>(), 7);
    let dirs = 30;
    let mut rng = SpecRng::new(client_seed(0));
    let (mut files, mut dir_counts, mut types) = ([0usize; 9], vec![0usize; dirs], [0usize; 5]);
    for _ in 0..200 {
        let d = deck(DEFAULT_DECK, dirs as u32, &mut rng);
        let mut per_class = [0usize; 4];
        for e in &d {
            per_class[usize::from(e.file.class)] += 1;
            files[usize::from(e.file.num)] += 1;
            dir_counts[e.file.dir as usize] += 1;
            types[RequestType::ALL
                .iter()
                .position(|t| *t == e.kind)
                .expect("type")] += 1;
        }
        assert_eq!(per_class, [350, 500, 140, 10]);
    }
    // Files: Zipf over ranks, mapped through FILE_ORDER.
    let rank_p: Vec<f64> = (0..9).map(|k| Zipf::new(9, 1.0).probability(k)).collect();
    let mut file_p = vec![0.0; 9];
    for (rank, &file) in FILE_ORDER.iter().enumerate() {
        file_p[usize::from(file)] = rank_p[rank];
    }
    assert!(chi2(&files, &file_p) < critical(8), "{files:?}");
    assert!(
        files[4] > files[3] && files[3] > files[5],
        "file 4 is the most popular"
    );
    let zd = Zipf::new(dirs, 1.0);
    let dir_p: Vec<f64> = (0..dirs).map(|k| zd.probability(k)).collect();
    assert!(chi2(&dir_counts, &dir_p) < critical(29), "{dir_counts:?}");
    let shares: Vec<f64> = RequestType::ALL.iter().map(|t| t.share()).collect();
    assert!(chi2(&types, &shares) < critical(4), "{types:?}");
}

#[test]
fn keep_alive_sizes() {
    assert!((keep_alive_connection_share() - 0.189_189).abs() < 1e-5);
    let mut rng = SpecRng::new(5);
    let mut requests = 0u64;
    let mut keep_alive_requests = 0u64;
    let mut sizes = [0usize; 16];
    for _ in 0..200_000 {
        let n = requests_for_connection(&mut rng);
        assert!(n == 1 || (5..=15).contains(&n), "{n}");
        sizes[n as usize] += 1;
        requests += u64::from(n);
        if n > 1 {
            keep_alive_requests += u64::from(n);
        }
    }
    let share = keep_alive_requests as f64 / requests as f64;
    assert!((share - 0.70).abs() < 0.01, "{share}");
    let uniform: Vec<usize> = sizes[5..=15].to_vec();
    let p = vec![1.0 / 11.0; 11];
    assert!(chi2(&uniform, &p) < 31.26, "{uniform:?}"); // df 10, p = 0.001
}

#[test]
fn request_bytes_follow_the_client() {
    let t = Targets {
        host: "sut".into(),
        url_root: String::new(),
        dynamic: "/web99".into(),
        cgi: "/cgi-bin/web99".into(),
        post: "/web99".into(),
        version: HttpVersion::Http10,
    };
    let file = FileId {
        dir: 4,
        class: 1,
        num: 3,
    };
    let req = |kind, keep_alive, t: &Targets| {
        let mut out = Vec::new();
        format_request(&Entry { file, kind }, t, keep_alive, 10_007, 20, &mut out);
        String::from_utf8(out).expect("ascii")
    };
    assert_eq!(
        req(RequestType::Static, true, &t),
        "GET /file_set/dir00004/class1_3 HTTP/1.0\r\nConnection: Keep-Alive\r\nAccept: */*\r\nHost: sut\r\n\r\n"
    );
    assert_eq!(
        req(RequestType::Cad, false, &t),
        "GET /web99?/file_set/dir00004/class1_3 HTTP/1.0\r\nPragma: no-cache\r\nCache-Control: no-cache\r\n\
         Cookie: my_cookie=user_id=10007&last_ad=20\r\nAccept: */*\r\nHost: sut\r\n\r\n"
    );
    assert_eq!(
        req(RequestType::Cgi, false, &t),
        "GET /cgi-bin/web99?/file_set/dir00004/class1_3 HTTP/1.0\r\nPragma: no-cache\r\nCache-Control: no-cache\r\n\
         Accept: */*\r\nHost: sut\r\n\r\n"
    );
    let body = "urlroot=/file_set/&dir=00004&class=1&num=3&client=10007";
    assert_eq!(
        req(RequestType::Post, false, &t),
        format!(
            "POST /web99 HTTP/1.0\r\nPragma: no-cache\r\nCache-Control: no-cache\r\n\
             Cookie: my_cookie=user_id=10007&last_ad=20\r\nContent-type: application/x-www-form-urlencoded\r\n\
             Accept: */*\r\nHost: sut\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    );
    let prefixed = Targets {
        url_root: "/specweb99".into(),
        dynamic: "/web99?/specweb99".into(),
        post: "/web99?/specweb99".into(),
        version: HttpVersion::Http11,
        ..t
    };
    assert!(
        req(RequestType::Static, true, &prefixed)
            .starts_with("GET /specweb99/file_set/dir00004/class1_3 HTTP/1.1\r\nAccept")
    );
    assert!(
        req(RequestType::Dynamic, true, &prefixed)
            .starts_with("GET /web99?/specweb99/file_set/dir00004/class1_3 HTTP/1.1\r\nPragma")
    );
    assert!(
        req(RequestType::Post, true, &prefixed).contains("urlroot=/specweb99/file_set/&dir=00004")
    );
    assert!(req(RequestType::Post, true, &prefixed).starts_with("POST /web99 HTTP/1.1\r\n"));
}
