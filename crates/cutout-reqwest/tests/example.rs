//! Runs the `per_host` example's code and checks what it reports.

#[allow(dead_code)] // the example's `main`
#[path = "../examples/per_host.rs"]
mod example;

use cutout::State;

#[tokio::test]
async fn the_per_host_example_opens_only_the_failing_host_s_breaker() {
    let report = example::run().await.expect("the example runs");
    assert_eq!(
        report.healthy_ok, 8,
        "every request to the healthy host succeeded"
    );
    assert_eq!(report.failing_responses, 5, "five 500s reached the caller");
    assert_eq!(
        report.refused, 3,
        "then the failing host's requests were refused"
    );
    assert_eq!(
        report.failing_server_saw, 5,
        "refused requests were not sent"
    );
    assert_eq!(report.healthy_state, State::Closed);
    assert_eq!(report.failing_state, State::Open);
}
