//! TCP connections and their counters from the kernel's socket diagnostics (netlink
//! `sock_diag`, what `ss -tin` reads): endpoints, the socket's inode (to find its process),
//! and from `tcp_info` the bytes acknowledged and received, retransmitted segments, round-trip
//! time and the send queue. No packet is captured.
//!
//! Only established connections are dumped (listening and closing sockets carry no traffic);
//! sock_diag answers for the caller's network namespace, and unprivileged callers see every
//! socket too.

use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::nlas::Nla;
use netlink_packet_sock_diag::inet::{
    ExtensionFlags, InetRequest, InetResponse, SocketId, StateFlags,
};
use netlink_sys::{Socket, SocketAddr as NetlinkAddr, protocols::NETLINK_SOCK_DIAG};

/// Bound on the bytes of replies read per family, so a dump always ends (a million
/// connections fit in far less).
const MAX_REPLY_BYTES: usize = 1 << 30;

/// One established TCP connection, as the kernel counts it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TcpConn {
    /// The kernel's unique id of the socket (stays the same for its life; never reused).
    pub cookie: u64,
    /// This machine's end.
    pub local: Option<SocketAddr>,
    /// The peer.
    pub remote: Option<SocketAddr>,
    /// Socket inode: `socket:[INODE]` among a process's open files.
    pub inode: u32,
    /// Owner's user id.
    pub uid: u32,
    /// Bytes sent and acknowledged by the peer.
    pub bytes_acked: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Segments sent.
    pub segs_out: u64,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u64,
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Bytes waiting in the send queue (not yet acknowledged).
    pub send_queue: u32,
}

/// Every established TCP connection (IPv4 and IPv6) in this network namespace.
pub fn tcp_connections() -> io::Result<Vec<TcpConn>> {
    tcp_sockets(StateFlags::ESTABLISHED)
}

/// The local ports of listening TCP sockets (IPv4 and IPv6), from the same dump restricted
/// to LISTEN: a connection on one of them was accepted, not opened.
// Only the off-CPU waits ask (`profile`, `top --waits`), which need the `bpf` and `profile` features.
#[cfg_attr(not(all(feature = "bpf", feature = "profile")), allow(dead_code))]
pub fn tcp_listening_ports() -> io::Result<std::collections::HashSet<u16>> {
    Ok(tcp_sockets(StateFlags::LISTEN)?
        .into_iter()
        .filter_map(|c| c.local.map(|l| l.port()))
        .collect())
}

/// Another network namespace's established connections and listening ports (a container's,
/// named by its `/proc/PID/ns/net`). A netlink socket answers for the namespace of the thread
/// that made it, so the dump runs on a thread of its own that joins the namespace and ends
/// with the dump: tacho's other threads never leave theirs. Needs CAP_SYS_ADMIN (root).
// Only the off-CPU profile and `top --waits` ask, which need the `bpf` and `profile` features.
#[cfg_attr(not(all(feature = "bpf", feature = "profile")), allow(dead_code))]
pub fn tcp_table_in(
    netns: &std::fs::File,
) -> io::Result<(Vec<TcpConn>, std::collections::HashSet<u16>)> {
    use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
    use std::os::fd::AsFd;
    std::thread::scope(|s| {
        s.spawn(|| {
            move_into_link_name_space(netns.as_fd(), Some(LinkNameSpaceType::Network))?;
            Ok((tcp_connections()?, tcp_listening_ports()?))
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the namespace's dump stopped")))
    })
}

fn tcp_sockets(states: StateFlags) -> io::Result<Vec<TcpConn>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&NetlinkAddr::new(0, 0))?;
    let mut out = Vec::new();
    for (family, id) in [
        (AF_INET, SocketId::new_v4()),
        (AF_INET6, SocketId::new_v6()),
    ] {
        dump(&socket, family, id, states.clone(), &mut out)?;
    }
    Ok(out)
}

fn dump(
    socket: &Socket,
    family: u8,
    id: SocketId,
    states: StateFlags,
    out: &mut Vec<TcpConn>,
) -> io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::INFO,
            states,
            socket_id: id,
        })
        .into(),
    );
    request.finalize();
    let mut buf = vec![0; request.buffer_len()];
    request.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let mut reply = Vec::with_capacity(64 << 10);
    let mut read = 0usize;
    loop {
        reply.clear();
        let n = socket.recv(&mut reply, 0)?;
        read += n;
        if n == 0 || read > MAX_REPLY_BYTES {
            return Err(io::Error::other("sock_diag's dump did not end"));
        }
        let mut at = 0;
        while at < n {
            let msg = NetlinkMessage::<SockDiagMessage>::deserialize(&reply[at..n])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    out.push(conn(&r));
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

/// The connection a response describes; counters stay 0 where tcp_info is missing.
fn conn(r: &InetResponse) -> TcpConn {
    let h = &r.header;
    let id = &h.socket_id;
    let endpoint = |addr, port| Some(SocketAddr::new(addr, port));
    let mut c = TcpConn {
        cookie: u64::from_ne_bytes(id.cookie),
        local: endpoint(id.source_address, id.source_port),
        remote: endpoint(id.destination_address, id.destination_port),
        inode: h.inode,
        uid: h.uid,
        send_queue: h.send_queue,
        ..TcpConn::default()
    };
    for nla in &r.nlas {
        if let Nla::TcpInfo(i) = nla {
            c.bytes_acked = i.bytes_acked;
            c.bytes_received = i.bytes_received;
            c.segs_out = u64::from(i.segs_out);
            c.total_retrans = u64::from(i.total_retrans);
            c.rtt_us = i.rtt;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_loopback_connection_is_dumped_with_its_bytes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        server.read_exact(&mut got).unwrap();
        let local = client.local_addr().unwrap();
        let conns = tcp_connections().unwrap();
        let mine = conns
            .iter()
            .find(|c| c.local == Some(local) && c.remote == Some(addr))
            .expect("the client's connection");
        // The handshake's SYN counts as one byte acknowledged.
        assert!(mine.bytes_acked.abs_diff(100_000) <= 1, "{mine:?}");
        assert!(mine.inode > 0 && mine.segs_out > 0);
        let theirs = conns
            .iter()
            .find(|c| c.local == Some(addr) && c.remote == Some(local))
            .expect("the server's end");
        assert!(theirs.bytes_received.abs_diff(100_000) <= 1, "{theirs:?}");
        assert_ne!(mine.cookie, theirs.cookie);
    }
}
