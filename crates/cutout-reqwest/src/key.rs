//! [`host_key`]: the per-host breaker key of a request's URL, as cutout-tower's [`HostKey`].

use cutout_tower::keyed::HostKey;
use reqwest::Url;

/// The key of a request to `url` in per-host breakers: its scheme, host and port, the same
/// [`HostKey`] that cutout-tower's [`HostKey::of`] gives for an `http::Request` to that URL,
/// so a host has one breaker id (`scheme://host:port`) in reqwest and tower stacks alike.
///
/// Normalised by [`HostKey::new`], as [`HostKey::of`] is: the scheme and host in lower case,
/// the port the URL's, else 443 for `https` and 80 otherwise, no trailing dot on a DNS name,
/// an IPv6 address in its canonical form. Never panics; a URL without a host (which reqwest
/// does not send) has an empty host.
///
/// Use it to look a host's breaker up in the map the middleware was given:
///
/// ```
/// use cutout::Settings;
/// use cutout_reqwest::{KeyedBreakers, host_key};
/// use reqwest::Url;
///
/// let hosts = KeyedBreakers::builder(Settings::default()).build();
/// let url = Url::parse("https://API.example/v1/items?page=2")?;
/// let key = host_key(&url);
/// assert_eq!(key.to_string(), "https://api.example:443");
/// assert!(hosts.get(&key).is_none(), "no request has been sent there yet");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn host_key(url: &Url) -> HostKey {
    // `Url::port` is `None` for a scheme's default port (80 for http, 443 for https), which
    // `HostKey::new` restores, with the rest of its normalisation (a trailing dot, IPv6).
    HostKey::new(url.scheme(), url.host_str().unwrap_or_default(), url.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of a URL is the key cutout-tower gives an `http::Request` to it.
    #[test]
    fn host_key_agrees_with_cutout_tower_s_host_key() {
        for url in [
            "http://127.0.0.1:8080/ok",
            "http://localhost/",
            "http://example.com:80/",
            "https://example.com/",
            "https://example.com:443/a?b=c",
            "https://Example.COM:8443/",
            "HTTP://EXAMPLE.com/",
            "http://user:secret@example.com:81/",
            "http://[::1]:3000/",
            "https://[2001:db8::1]/",
            "http://xn--bcher-kva.example/",
            "http://bücher.example/",
        ] {
            let parsed = Url::parse(url).unwrap();
            let request = http::Request::get(parsed.as_str()).body(()).unwrap();
            assert_eq!(host_key(&parsed), HostKey::of(&request), "{url}");
        }
    }

    #[test]
    fn host_key_displays_as_the_breaker_id() {
        let key = host_key(&Url::parse("http://127.0.0.1:8080/x").unwrap());
        assert_eq!(key.to_string(), "http://127.0.0.1:8080");
        let key = host_key(&Url::parse("data:text/plain,hi").unwrap());
        assert_eq!(key.to_string(), "data://:80");
    }

    /// One host, one key, however the URL spells it: a trailing dot, an IPv6 address written
    /// out in full, upper case; the same in tower (from the raw request) and here.
    #[test]
    fn every_spelling_of_one_host_is_one_key_in_both_crates() {
        for (spellings, key) in [
            (
                [
                    "http://a.example./x",
                    "http://A.Example/y",
                    "http://a.example:80/",
                ],
                "http://a.example:80",
            ),
            (
                [
                    "http://[0:0:0:0:0:0:0:1]:3000/",
                    "http://[::1]:3000/",
                    "http://[0000::0001]:3000/a",
                ],
                "http://[::1]:3000",
            ),
        ] {
            for url in spellings {
                let request = http::Request::get(url).body(()).unwrap();
                assert_eq!(HostKey::of(&request).to_string(), key, "tower: {url}");
                assert_eq!(
                    host_key(&Url::parse(url).unwrap()).to_string(),
                    key,
                    "reqwest: {url}"
                );
            }
        }
    }
}
