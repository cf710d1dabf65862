//! The declarative layer: `#[cutout::resilient]` on a client trait, seed 001's scenario on a
//! manual clock, every call printed: `cargo run -p cutout --example declarative` (cutout's
//! dev-dependency on itself turns `macros` on for its examples and tests).

use std::sync::atomic::{AtomicBool, Ordering};

use cutout::clock::ManualClock;
use cutout::config::Config;
use cutout::{Registry, Rejected};

/// What the payment client answers.
#[derive(Debug)]
enum PayError {
    Declined,
    Refused(Rejected),
}

impl From<Rejected> for PayError {
    fn from(rejected: Rejected) -> Self {
        PayError::Refused(rejected)
    }
}

/// The client. `#[breaker]` takes the configuration file's keys (snake_case), checked when
/// this compiles.
#[cutout::resilient]
trait PaymentGateway {
    #[breaker(
        name = "payments",
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    fn charge(&self, order: &str) -> Result<String, PayError>;

    /// Shares the breaker "payments": a refund fails fast while charges keep failing.
    #[breaker(
        name = "payments",
        window_size = 10,
        minimum_calls = 10,
        failure_ratio = "50%",
        consecutive_failures = "off",
        break_duration = "30s",
        jitter = "none",
        half_open_probes = 2,
        probe_successes = 2
    )]
    fn refund(&self, order: &str) -> Result<String, PayError>;
}

#[derive(Default)]
struct Backend {
    down: AtomicBool,
}

impl PaymentGateway for Backend {
    fn charge(&self, order: &str) -> Result<String, PayError> {
        if self.down.load(Ordering::Relaxed) {
            Err(PayError::Declined)
        } else {
            Ok(format!("receipt for {order}"))
        }
    }

    fn refund(&self, order: &str) -> Result<String, PayError> {
        Ok(format!("refunded {order}"))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A file's `instances.payments` overrides the attribute key by key: here only the break.
    let config = Config::from_toml(
        r#"
        [instances.payments]
        break-duration = "45s"
        "#,
    )?;
    let clock = ManualClock::new();
    let registry = Registry::builder()
        .clock(clock.clone())
        .config(config)
        .build();
    let payments = PaymentGatewayResilient::new(Backend::default(), &registry)?;
    let breaker = registry.get("payments")?;
    println!("breaker ids: {:?}", registry.ids());
    println!(
        "break-duration {:?} (the file's), window {:?} (the attribute's)",
        breaker.settings().break_duration(),
        breaker.settings().window()
    );

    let show = |what: &str, result: Result<String, PayError>| {
        let answer = match result {
            Ok(receipt) => receipt,
            Err(PayError::Declined) => "declined".to_owned(),
            Err(PayError::Refused(r)) => format!("refused: {r}"),
        };
        let state = format!("{:?}", breaker.state());
        println!(
            "{:>5.1}s {what:<7} {state:<9} {answer}",
            clock.elapsed().as_secs_f64()
        );
    };

    for i in 0..5 {
        show("charge", payments.charge(&format!("ok-{i}")));
    }
    PaymentGatewayResilient::delegate(&payments)
        .down
        .store(true, Ordering::Relaxed);
    for _ in 0..5 {
        show("charge", payments.charge("ko"));
    }
    show("refund", payments.refund("ok-0"));

    PaymentGatewayResilient::delegate(&payments)
        .down
        .store(false, Ordering::Relaxed);
    clock.elapse_break(&breaker);
    show("charge", payments.charge("probe-1"));
    show("charge", payments.charge("probe-2"));
    show("refund", payments.refund("ok-0"));
    Ok(())
}
