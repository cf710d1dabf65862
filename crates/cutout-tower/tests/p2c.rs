//! The p2c example, run: three endpoints on loopback, one failing, 1,000 requests through
//! tower's p2c `Balance` (issue 29, acceptance 2).

#[path = "../examples/p2c.rs"]
mod p2c;

use p2c::SetUp;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2c_routes_around_an_open_endpoint_in_both_readiness_modes() {
    let addrs = p2c::upstreams().await.unwrap();
    for set_up in [SetUp::WaitForBreak, SetUp::FailInCall] {
        let report = p2c::run(set_up, &addrs, 1_000).await.unwrap();
        println!("{set_up:?}: {report:?}");
        assert_eq!(
            report.failing_state,
            Some(cutout::State::Open),
            "{set_up:?}"
        );
        assert!(
            report.refused <= 10,
            "{set_up:?}: at most 1% of 1,000 refused: {report:?}"
        );
        assert_eq!(report.ok + report.failed + report.refused, 1_000);
    }
    // Measured outside the breaker, the load cannot see it: p2c sends the open endpoint its
    // share and every one of those is refused (what an open breaker answering `Ready` with no
    // `Load` of its own came to before).
    let blind = p2c::run(SetUp::LoadBlind, &addrs, 1_000).await.unwrap();
    println!("LoadBlind: {blind:?}");
    assert!(blind.refused > 100, "{blind:?}");
}
