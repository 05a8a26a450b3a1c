//! DNS traffic, as dnstop counts it: queries and answers seen on the wire, matched by client,
//! server and query id, so each answer has its response time and its name.
//!
//! Packets are IP datagrams (the capture gives them without the link header); IP and UDP are
//! sliced by `etherparse` and DNS is parsed by `simple-dns`, both bounds-checked crates, so a
//! hostile packet is at worst skipped. What is kept is bounded: at most [`MAX_PENDING`]
//! unanswered queries, and per interval [`MAX_NAMES`] names, clients and servers each (the
//! rest are counted as dropped).
//!
//! Any local user can send a datagram to port 53 that says it is an answer, so an answer
//! counts only when it comes from port 53 to the port a query came from, with that query's
//! id and name: anything else is counted as unmatched, never by its response code.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use serde::Serialize;
use simple_dns::{Packet, PacketFlag};

/// Queries waiting for their answer, at most; beyond, the oldest are given up.
const MAX_PENDING: usize = 65_536;
/// Distinct names tracked per interval, at most.
pub(crate) const MAX_NAMES: usize = 4096;
/// A query unanswered for this long is counted as lost.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// One query in flight.
struct Pending {
    sent: Instant,
    name: String,
}

/// Counts per name over an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NameCounts {
    /// Queries for the name.
    pub queries: u64,
    /// Answers by response code (`NOERROR`, `NXDOMAIN`, `SERVFAIL`, …).
    pub rcodes: BTreeMap<String, u64>,
    /// Slowest answer, milliseconds.
    pub max_ms: Option<f64>,
}

/// What one interval's traffic added up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DnsCounts {
    /// Queries seen (from a client to a server).
    pub queries: u64,
    /// Answers matched to a query in flight.
    pub answers: u64,
    /// Queries given up after 5 s without an answer.
    pub unanswered: u64,
    /// Answers by response code.
    pub rcodes: BTreeMap<String, u64>,
    /// Queries by record type (`A`, `AAAA`, …).
    pub qtypes: BTreeMap<String, u64>,
    /// Queries by client address.
    pub sources: BTreeMap<String, u64>,
    /// Queries by server address and port.
    pub destinations: BTreeMap<String, u64>,
    /// Per name (at most [`MAX_NAMES`]; `names_dropped` counts queries for the rest).
    pub names: BTreeMap<String, NameCounts>,
    /// Queries whose name was not kept because the table was full.
    pub names_dropped: u64,
    /// Queries whose client was not kept in `sources` (at most [`MAX_NAMES`] clients).
    pub sources_dropped: u64,
    /// Queries whose server was not kept in `destinations` (at most [`MAX_NAMES`]).
    pub destinations_dropped: u64,
    /// Datagrams that said they were answers but matched no query in flight.
    pub unmatched: u64,
    /// Response times of matched answers, milliseconds.
    pub response_ms: Vec<f64>,
    /// Datagrams on port 53 that were not DNS.
    pub malformed: u64,
}

/// Matches answers to queries and counts; fed packets by the capture.
#[derive(Default)]
pub struct DnsTracker {
    pending: HashMap<(SocketAddr, SocketAddr, u16), Pending>,
    counts: DnsCounts,
}

impl DnsTracker {
    /// Takes one captured IP datagram seen at `at`.
    pub fn packet(&mut self, ip: &[u8], at: Instant) {
        let Some((src, dst, payload)) = udp(ip) else {
            return;
        };
        let Ok(dns) = Packet::parse(payload) else {
            self.counts.malformed += 1;
            return;
        };
        let Some(q) = dns.questions.first() else {
            return;
        };
        let name = q.qname.to_string().to_ascii_lowercase();
        let qtype = match q.qtype {
            simple_dns::QTYPE::TYPE(t) => format!("{t:?}"),
            other => format!("{other:?}"),
        };
        if dns.has_flags(PacketFlag::RESPONSE) {
            self.answer(src, dst, dns.id(), rcode(&dns), name, at);
        } else if dst.port() == 53 {
            self.query(src, dst, dns.id(), name, qtype, at);
        }
    }

    fn query(
        &mut self,
        client: SocketAddr,
        server: SocketAddr,
        id: u16,
        name: String,
        qtype: String,
        at: Instant,
    ) {
        let c = &mut self.counts;
        c.queries += 1;
        *c.qtypes.entry(qtype).or_default() += 1;
        match bounded_entry(&mut c.sources, client.ip().to_string()) {
            Some(n) => *n += 1,
            None => c.sources_dropped += 1,
        }
        match bounded_entry(&mut c.destinations, server.to_string()) {
            Some(n) => *n += 1,
            None => c.destinations_dropped += 1,
        }
        if let Some(n) = name_entry(c, &name) {
            n.queries += 1;
        }
        if self.pending.len() >= MAX_PENDING {
            self.expire(at, Duration::ZERO);
        }
        self.pending
            .insert((client, server, id), Pending { sent: at, name });
    }

    fn answer(
        &mut self,
        server: SocketAddr,
        client: SocketAddr,
        id: u16,
        rcode: String,
        name: String,
        at: Instant,
    ) {
        let key = (client, server, id);
        let matched = server.port() == 53 && self.pending.get(&key).is_some_and(|p| p.name == name);
        let c = &mut self.counts;
        if !matched {
            c.unmatched += 1;
            return;
        }
        let Some(query) = self.pending.remove(&key) else {
            return;
        };
        let ms = at.saturating_duration_since(query.sent).as_secs_f64() * 1e3;
        c.answers += 1;
        *c.rcodes.entry(rcode.clone()).or_default() += 1;
        c.response_ms.push(ms);
        if let Some(n) = name_entry(c, &name) {
            *n.rcodes.entry(rcode).or_default() += 1;
            n.max_ms = Some(n.max_ms.map_or(ms, |m| m.max(ms)));
        }
    }

    /// Gives up queries older than `timeout` (all of the oldest half when `timeout` is zero:
    /// the table is full).
    fn expire(&mut self, now: Instant, timeout: Duration) {
        let before = self.pending.len();
        if timeout.is_zero() {
            let mut sent: Vec<Instant> = self.pending.values().map(|p| p.sent).collect();
            sent.sort();
            let cut = sent[sent.len() / 2];
            self.pending.retain(|_, p| p.sent > cut);
        } else {
            self.pending
                .retain(|_, p| now.saturating_duration_since(p.sent) < timeout);
        }
        self.counts.unanswered += (before - self.pending.len()) as u64;
    }

    /// What was counted since the last call; queries pending longer than 5 s are given up.
    pub fn take(&mut self, now: Instant) -> DnsCounts {
        self.expire(now, ANSWER_TIMEOUT);
        std::mem::take(&mut self.counts)
    }
}

/// The name's counts, unless the table is full (then the query is counted as dropped).
fn name_entry<'a>(c: &'a mut DnsCounts, name: &str) -> Option<&'a mut NameCounts> {
    if !c.names.contains_key(name) && c.names.len() >= MAX_NAMES {
        c.names_dropped += 1;
        return None;
    }
    Some(c.names.entry(name.to_string()).or_default())
}

/// The count of `key`, unless `map` is full ([`MAX_NAMES`]) and lacks it.
fn bounded_entry(map: &mut BTreeMap<String, u64>, key: String) -> Option<&mut u64> {
    if map.len() >= MAX_NAMES && !map.contains_key(&key) {
        return None;
    }
    Some(map.entry(key).or_default())
}

/// `NOERROR`, `NXDOMAIN`, `SERVFAIL`, … as dig prints them.
fn rcode(p: &Packet) -> String {
    use simple_dns::RCODE;
    match p.rcode() {
        RCODE::NoError => "NOERROR".into(),
        RCODE::FormatError => "FORMERR".into(),
        RCODE::ServerFailure => "SERVFAIL".into(),
        RCODE::NameError => "NXDOMAIN".into(),
        RCODE::NotImplemented => "NOTIMP".into(),
        RCODE::Refused => "REFUSED".into(),
        other => format!("{other:?}").to_ascii_uppercase(),
    }
}

/// Source, destination and payload of a UDP datagram in an IPv4 or IPv6 packet.
fn udp(ip: &[u8]) -> Option<(SocketAddr, SocketAddr, &[u8])> {
    let p = SlicedPacket::from_ip(ip).ok()?;
    let (src, dst): (IpAddr, IpAddr) = match p.net? {
        NetSlice::Ipv4(v4) => (
            v4.header().source_addr().into(),
            v4.header().destination_addr().into(),
        ),
        NetSlice::Ipv6(v6) => (
            v6.header().source_addr().into(),
            v6.header().destination_addr().into(),
        ),
        NetSlice::Arp(_) => return None,
    };
    match p.transport? {
        TransportSlice::Udp(u) => Some((
            SocketAddr::new(src, u.source_port()),
            SocketAddr::new(dst, u.destination_port()),
            u.payload(),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use simple_dns::{CLASS, Name, QCLASS, QTYPE, Question, TYPE};

    /// An IPv4 UDP datagram from `src` to `dst` carrying `payload`.
    fn datagram(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ipv4(src, dst, 64).udp(sport, dport);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    fn dns(id: u16, name: &str, response: Option<simple_dns::RCODE>) -> Vec<u8> {
        let mut p = Packet::new_query(id);
        if let Some(rc) = response {
            p = p.into_reply();
            *p.rcode_mut() = rc;
        }
        p.questions.push(Question::new(
            Name::new_unchecked(name),
            QTYPE::TYPE(TYPE::A),
            QCLASS::CLASS(CLASS::IN),
            false,
        ));
        p.build_bytes_vec().unwrap()
    }

    const C: [u8; 4] = [10, 99, 0, 1];
    const S: [u8; 4] = [10, 99, 0, 2];

    #[test]
    fn answers_are_matched_to_queries_with_their_time_and_code() {
        let t0 = Instant::now();
        let mut t = DnsTracker::default();
        t.packet(&datagram(C, 40000, S, 53, &dns(7, "Good.Test", None)), t0);
        t.packet(&datagram(C, 40001, S, 53, &dns(8, "nx.test", None)), t0);
        t.packet(&datagram(C, 40002, S, 53, &dns(9, "lost.test", None)), t0);
        let later = t0 + Duration::from_millis(12);
        use simple_dns::RCODE;
        t.packet(
            &datagram(S, 53, C, 40000, &dns(7, "good.test", Some(RCODE::NoError))),
            later,
        );
        t.packet(
            &datagram(S, 53, C, 40001, &dns(8, "nx.test", Some(RCODE::NameError))),
            later,
        );
        t.packet(&datagram(C, 40003, S, 53, b"not dns at all"), later);
        let c = t.take(later);
        assert_eq!((c.queries, c.answers, c.malformed), (3, 2, 1));
        assert_eq!(c.rcodes["NXDOMAIN"], 1);
        assert_eq!(c.rcodes["NOERROR"], 1);
        assert_eq!(c.qtypes["A"], 3);
        assert_eq!(c.sources["10.99.0.1"], 3);
        assert_eq!(c.destinations["10.99.0.2:53"], 3);
        assert_eq!(c.names["nx.test"].rcodes["NXDOMAIN"], 1);
        assert_eq!(c.response_ms.len(), 2);
        assert!((c.response_ms[0] - 12.0).abs() < 1e-6);
        assert_eq!(c.unanswered, 0);
        // The lost query is given up once 5 s have passed, in a later interval.
        let c = t.take(t0 + Duration::from_secs(6));
        assert_eq!((c.queries, c.unanswered), (0, 1));
    }

    #[test]
    fn names_and_pending_queries_are_bounded() {
        let t0 = Instant::now();
        let mut t = DnsTracker::default();
        for i in 0..(MAX_NAMES as u16 + 10) {
            let name = format!("n{i}.test");
            t.packet(&datagram(C, 1024 + i, S, 53, &dns(i, &name, None)), t0);
        }
        let c = t.take(t0);
        assert_eq!(c.names.len(), MAX_NAMES);
        assert_eq!(c.names_dropped, 10);
    }

    #[test]
    fn answers_that_match_no_query_are_not_counted_by_code() {
        use simple_dns::RCODE;
        let t0 = Instant::now();
        let mut t = DnsTracker::default();
        t.packet(&datagram(C, 40000, S, 53, &dns(7, "a.test", None)), t0);
        let fail = |id, name| dns(id, name, Some(RCODE::ServerFailure));
        // Not from port 53; the wrong id; the wrong name; the wrong client port; no query.
        t.packet(&datagram(S, 5353, C, 40000, &fail(7, "a.test")), t0);
        t.packet(&datagram(S, 53, C, 40000, &fail(8, "a.test")), t0);
        t.packet(&datagram(S, 53, C, 40000, &fail(7, "b.test")), t0);
        t.packet(&datagram(S, 53, C, 40001, &fail(7, "a.test")), t0);
        t.packet(
            &datagram(C, 40002, [127, 0, 0, 1], 53, &fail(1, "x.test")),
            t0,
        );
        let c = t.take(t0);
        assert_eq!((c.answers, c.unmatched), (0, 5));
        assert!(c.rcodes.is_empty(), "{:?}", c.rcodes);
        // The real answer still matches.
        t.packet(&datagram(S, 53, C, 40000, &fail(7, "a.test")), t0);
        let c = t.take(t0);
        assert_eq!((c.answers, c.rcodes["SERVFAIL"]), (1, 1));
    }

    #[test]
    fn clients_and_servers_are_bounded_and_the_rest_counted() {
        let t0 = Instant::now();
        let mut t = DnsTracker::default();
        for i in 0..(MAX_NAMES as u32 + 10) {
            let [_, a, b, c] = i.to_be_bytes();
            let client = [10, a, b, c];
            let server = [172, a, b, c];
            t.packet(
                &datagram(client, 4000, server, 53, &dns(1, "n.test", None)),
                t0,
            );
        }
        let c = t.take(t0);
        assert_eq!((c.sources.len(), c.sources_dropped), (MAX_NAMES, 10));
        assert_eq!(
            (c.destinations.len(), c.destinations_dropped),
            (MAX_NAMES, 10)
        );
    }

    proptest! {
        #[test]
        fn any_datagram_is_counted_or_skipped_without_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            raw in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut t = DnsTracker::default();
            t.packet(&datagram(C, 53, S, 5353, &payload), Instant::now());
            t.packet(&raw, Instant::now());
            let _ = t.take(Instant::now());
        }
    }
}
