//! Traffic shaping on each interface's egress: the rate a token-bucket (`tbf`) root qdisc lets
//! out, read from the kernel over rtnetlink (`tc qdisc show` asks the same).
//!
//! A link's /sys speed says what the wire could carry; a shaper says what the admin lets out,
//! and on virtual links (veth reports 10 Gb/s, many report none) it is the only capacity there
//! is. Only `tbf` at the root is read: its rate is the whole interface's. Classful shapers
//! (htb, hfsc) spread their rates over classes and are not a single capacity; they are not
//! read.
//!
//! rtnetlink answers for the network namespace of the calling process, so it is asked only
//! about this machine (never for a fixture tree).

use std::collections::HashMap;
use std::io;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NlaBuffer,
    NlasIterator,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage, TcOption};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

/// A shaper on an interface's egress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper {
    /// The qdisc (`tbf`).
    pub kind: String,
    /// The rate it lets out, bytes per second.
    pub bytes_per_s: u64,
}

/// `TCA_TBF_PARMS`: struct tc_tbf_qopt, whose first member is the rate spec.
const TCA_TBF_PARMS: u16 = 1;
/// `TCA_TBF_RATE64`: the rate in bytes/s when it does not fit the spec's 32 bits.
const TCA_TBF_RATE64: u16 = 4;
/// Offset of `rate` (u32, bytes/s) in struct tc_ratespec: cell_log u8, linklayer u8,
/// overhead u16, cell_align i16, mpu u16.
const RATESPEC_RATE_OFFSET: usize = 8;
/// Bound on the replies read, so a kernel answer can never keep tacho reading forever (a
/// machine has one root qdisc per interface; thousands of interfaces fit in far less).
const MAX_REPLY_BYTES: usize = 64 << 20;

/// Root `tbf` shapers by interface index, from one rtnetlink dump of the qdiscs.
pub fn root_shapers() -> io::Result<HashMap<u32, Shaper>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut request = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::GetQueueDiscipline(TcMessage::default())),
    );
    request.header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    request.header.sequence_number = 1;
    request.finalize();
    let mut buf = vec![0; request.buffer_len()];
    request.serialize(&mut buf);
    socket.send(&buf, 0)?;

    let mut shapers = HashMap::new();
    let mut read = 0usize;
    let mut reply = Vec::with_capacity(64 << 10);
    loop {
        reply.clear();
        let n = socket.recv(&mut reply, 0)?;
        read += n;
        if n == 0 || read > MAX_REPLY_BYTES {
            return Err(io::Error::other("rtnetlink's qdisc dump did not end"));
        }
        let mut at = 0;
        while at < n {
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply[at..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(shapers),
                NetlinkPayload::Error(e) => {
                    return Err(e.to_io());
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewQueueDiscipline(q)) => {
                    if let Some((index, shaper)) = root_tbf(&q) {
                        shapers.insert(index, shaper);
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            at += len;
        }
    }
}

/// The shaper of a root `tbf` qdisc message, with its interface index.
fn root_tbf(q: &TcMessage) -> Option<(u32, Shaper)> {
    if q.header.parent != TcHandle::ROOT {
        return None;
    }
    let kind = q.attributes.iter().find_map(|a| match a {
        TcAttribute::Kind(k) => Some(k.as_str()),
        _ => None,
    })?;
    if kind != "tbf" {
        return None;
    }
    let options = q.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(o) => Some(o),
        _ => None,
    })?;
    // An option kind the crate does not parse comes whole, as one attribute whose value is
    // the nested attributes.
    let nested = options.iter().find_map(|o| match o {
        TcOption::Other(nla) => {
            let mut value = vec![0; nla.value_len()];
            nla.emit_value(&mut value);
            Some(value)
        }
        _ => None,
    })?;
    let bytes_per_s = tbf_rate(&nested)?;
    let index = u32::try_from(q.header.index).ok()?;
    Some((
        index,
        Shaper {
            kind: kind.to_string(),
            bytes_per_s,
        },
    ))
}

/// The rate in a tbf qdisc's nested options: the 64-bit attribute when present, else the
/// rate spec's 32-bit rate.
fn tbf_rate(nested: &[u8]) -> Option<u64> {
    let mut rate32 = None;
    let mut rate64 = None;
    for nla in NlasIterator::new(nested) {
        let nla: NlaBuffer<&[u8]> = nla.ok()?;
        let v = nla.value();
        match nla.kind() {
            TCA_TBF_PARMS => {
                let b = v.get(RATESPEC_RATE_OFFSET..RATESPEC_RATE_OFFSET + 4)?;
                rate32 = Some(u64::from(u32::from_ne_bytes(b.try_into().ok()?)));
            }
            TCA_TBF_RATE64 => {
                rate64 = Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?));
            }
            _ => {}
        }
    }
    rate64.or(rate32).filter(|&r| r > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One netlink attribute: length, kind, value, padded to 4 bytes.
    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        out.resize(len.next_multiple_of(4), 0);
        out
    }

    /// struct tc_tbf_qopt with `rate` bytes/s: rate spec, peak rate spec, limit, buffer, mtu.
    fn qopt(rate: u32) -> Vec<u8> {
        let mut spec = vec![0u8; 12];
        spec[RATESPEC_RATE_OFFSET..].copy_from_slice(&rate.to_ne_bytes());
        let mut out = spec;
        out.extend_from_slice(&[0u8; 12]);
        out.extend_from_slice(&[0u8; 12]);
        out
    }

    #[test]
    fn the_rate_comes_from_the_parameters_or_the_64_bit_attribute() {
        // tc qdisc add … tbf rate 10mbit: 1,250,000 bytes/s.
        let nested = nla(TCA_TBF_PARMS, &qopt(1_250_000));
        assert_eq!(tbf_rate(&nested), Some(1_250_000));
        // 40 Gbit/s does not fit: the spec holds ~0 and RATE64 the rate.
        let mut nested = nla(TCA_TBF_PARMS, &qopt(u32::MAX));
        nested.extend(nla(TCA_TBF_RATE64, &5_000_000_000u64.to_ne_bytes()));
        assert_eq!(tbf_rate(&nested), Some(5_000_000_000));
        // Truncated parameters, or none: no rate.
        assert_eq!(tbf_rate(&nla(TCA_TBF_PARMS, &[0u8; 6])), None);
        assert_eq!(tbf_rate(&[]), None);
    }

    #[test]
    fn this_machine_answers_a_dump() {
        // Every interface has some root qdisc, but perhaps no tbf: only the dump is checked.
        root_shapers().expect("rtnetlink qdisc dump");
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = tbf_rate(&bytes);
        }
    }
}
