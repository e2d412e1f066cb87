//! Which names this server answers to (DNS rebinding).
//!
//! A page on `attacker.example` whose name is re-pointed at 127.0.0.1 sends the browser's
//! requests here with `Host: attacker.example:3000` and a matching `Origin`, so an Origin check
//! alone takes them for same-origin. Every request whose `Host` is not one of the server's own
//! names is therefore refused with 421 before anything else looks at it: the loopback names
//! (`localhost`, `127.0.0.1`, `[::1]`) with the server's port, the address it listens on when
//! that is a specific one, and the names of `COUNTERSIGN_ALLOWED_HOSTS` (with or without a port;
//! behind a reverse proxy, the public name). A request without `Host` comes from no browser and
//! is not a rebinding.

use std::net::{IpAddr, SocketAddr};

/// One name the server answers to: any port, or only the one given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedName {
    host: String,
    port: Option<u16>,
}

/// The server's own names.
#[derive(Debug)]
pub struct HostAllowlist {
    configured: Vec<AllowedName>,
    /// The address the server listens on (its real port, e.g. when configured with port 0).
    addr: SocketAddr,
}

impl HostAllowlist {
    /// The names for a server listening on `addr`, plus `extra`
    /// (`COUNTERSIGN_ALLOWED_HOSTS` entries: `name` or `name:port`).
    pub fn new(addr: SocketAddr, extra: &[String]) -> Self {
        HostAllowlist {
            configured: extra
                .iter()
                .filter_map(|e| parse_host(e))
                .map(|(host, port)| AllowedName { host, port })
                .collect(),
            addr,
        }
    }

    /// Whether the `Host` value `host` names this server.
    pub fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = parse_host(host) else {
            return false;
        };
        let addr = self.addr;
        let own_port = port.unwrap_or(80) == addr.port();
        let loopback = matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]");
        let listening = !addr.ip().is_unspecified() && name == bracketed(addr.ip());
        ((loopback || listening) && own_port)
            || self
                .configured
                .iter()
                .any(|a| a.host == name && a.port.is_none_or(|p| Some(p) == port))
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What an operator reads in the refusal and the start-up log.
    pub fn describe(&self) -> String {
        let addr = self.addr;
        let mut names = vec![
            format!("localhost:{}", addr.port()),
            format!("127.0.0.1:{}", addr.port()),
            format!("[::1]:{}", addr.port()),
        ];
        if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
            names.push(format!("{}:{}", bracketed(addr.ip()), addr.port()));
        }
        names.extend(self.configured.iter().map(|a| match a.port {
            Some(p) => format!("{}:{p}", a.host),
            None => a.host.clone(),
        }));
        names.join(", ")
    }
}

fn bracketed(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// `name[:port]` (an IPv6 literal in brackets), lower-cased; `None` when it is not a host.
fn parse_host(value: &str) -> Option<(String, Option<u16>)> {
    let value = value.trim().to_ascii_lowercase();
    let (name, port) = if value.starts_with('[') {
        let end = value.find(']')?;
        let (name, rest) = value.split_at(end + 1);
        match rest {
            "" => (name.to_owned(), None),
            _ => (name.to_owned(), Some(rest.strip_prefix(':')?.parse().ok()?)),
        }
    } else {
        match value.rsplit_once(':') {
            Some((name, port)) => (name.to_owned(), Some(port.parse().ok()?)),
            None => (value.clone(), None),
        }
    };
    // A fully qualified name may end with a dot (`localhost.`): the same name.
    let name = name.strip_suffix('.').map(str::to_owned).unwrap_or(name);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b));
    valid.then_some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(addr: &str, extra: &[&str]) -> HostAllowlist {
        HostAllowlist::new(
            addr.parse().unwrap(),
            &extra.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    #[test]
    fn loopback_names_with_the_servers_port_are_its_own() {
        let hosts = list("127.0.0.1:3000", &[]);
        for host in [
            "localhost:3000",
            "127.0.0.1:3000",
            "[::1]:3000",
            "LOCALHOST:3000",
            "localhost.:3000",
        ] {
            assert!(hosts.allows(host), "{host}");
        }
        for host in [
            "attacker.example:3000",
            "localhost:3001",
            "localhost",
            "127.0.0.1:3000.evil.example",
            "127.0.0.2:3000",
            "",
            "localhost:3000:3000",
            "local host:3000",
            "[::1]",
        ] {
            assert!(!hosts.allows(host), "{host}");
        }
    }

    #[test]
    fn a_specific_listening_address_and_configured_names_are_allowed() {
        let hosts = list(
            "192.0.2.10:8080",
            &[
                "chat.example.com",
                "Proxy.example:443",
                "[2001:db8::1]:8080",
            ],
        );
        assert!(hosts.allows("192.0.2.10:8080"));
        assert!(!hosts.allows("192.0.2.11:8080"));
        assert!(hosts.allows("chat.example.com"), "any port");
        assert!(hosts.allows("chat.example.com:8443"));
        assert!(hosts.allows("proxy.example:443"));
        assert!(!hosts.allows("proxy.example"), "only the port given");
        assert!(hosts.allows("[2001:db8::1]:8080"));
        assert!(!hosts.allows("sub.chat.example.com"));
        // Listening everywhere: the loopback names and the configured ones only.
        let everywhere = list("0.0.0.0:80", &[]);
        assert!(everywhere.allows("localhost"), "port 80 may be left out");
        assert!(!everywhere.allows("0.0.0.0"));
        assert!(everywhere.describe().contains("localhost:80"));
    }
}
