//! The two worked examples of the circuit-breaker pattern (seed 003), reproduced: the same
//! outcomes, transitions, order and dependency call counts as the printed traces.

#[allow(dead_code)]
#[path = "../examples/exchange_rates.rs"]
mod exchange_rates;

#[allow(dead_code)]
#[path = "../examples/exchange_rates_retry.rs"]
mod exchange_rates_retry;

#[test]
fn first_example_prints_the_seed_trace() {
    let expected = "\
t=0s call 1: Failed (timeout)
t=0s call 2: Failed (timeout)
  state Closed -> Open: 3 consecutive failures
t=0s call 3: Failed (timeout)
t=0s call 4: Rejected (circuit open)
t=10s call 5: Rejected (circuit open)
  state Open -> HalfOpen: open duration elapsed
  state HalfOpen -> Closed: trial call succeeded
t=30s call 6: Ok (USD/KRW 1380)
t=30s call 7: Ok (USD/KRW 1380)
api calls: 5
";
    assert_eq!(exchange_rates::run(), expected);
}

#[test]
fn extended_example_prints_the_seed_trace() {
    let expected = "\
t=0s rates #1 try 1: Failed Timeout [failures 1]
t=1s rates #1 try 2: Failed Timeout [failures 2]
t=1s rates #2 try 1: Failed InvalidRequest [failures 2]
  rates: Closed -> Open: 3 consecutive failures
t=1s rates #3 try 1: Failed Unavailable [failures 3]
  retry stopped: circuit open
t=1s rates #4 try 1: Rejected CircuitOpen [failures 3]
t=1s stock #1 try 1: Ok [failures 0]
  rates: Open -> HalfOpen: open duration elapsed
  rates: HalfOpen -> Open: trial call failed
t=31s rates #5 try 1: Failed Timeout [failures 4]
  retry stopped: circuit open
t=45s rates #6 try 1: Rejected CircuitOpen [failures 4]
  rates: Open -> HalfOpen: open duration elapsed
  rates: HalfOpen -> Closed: trial call succeeded
t=61s rates #7 try 1: Ok [failures 0]
rates api calls: 6, stock api calls: 1
";
    assert_eq!(exchange_rates_retry::run(), expected);
}
