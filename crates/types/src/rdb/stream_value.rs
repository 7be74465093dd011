//! Our [`Stream`] as an RDB stream object, both directions; the byte format is
//! `super::stream`'s. Written one node at a time (no copy of the whole stream), read whole.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use super::stream::{
    read_stream, write_stream, ConsumerImage, EntryImage, GroupImage, NodeImage, PendingImage,
    StreamMeta,
};
use super::wire::{RdbType, Reader, Result, Writer};
use crate::stream::{Consumer, Group, Nack, Stream, StreamId};

/// Writes the body of a stream object (type byte already written) as Redis 7.0's
/// `RDB_TYPE_STREAM_LISTPACKS_2`.
pub fn write<W: Write>(w: &mut Writer<W>, s: &Stream) -> io::Result<()> {
    let meta = StreamMeta {
        length: s.len(),
        last_id: s.last_id,
        first_id: s.first_id,
        max_deleted_id: s.max_deleted_id,
        entries_added: s.entries_added,
    };
    let groups: Vec<GroupImage> = s
        .groups
        .iter()
        .map(|(name, g)| GroupImage {
            name: name.to_vec(),
            last_id: g.last_id,
            entries_read: g.entries_read,
            pending: g
                .pel
                .iter()
                .map(|(i, n)| PendingImage {
                    id: *i,
                    delivery_time: n.delivery_time,
                    delivery_count: n.delivery_count,
                })
                .collect(),
            consumers: g
                .consumers
                .iter()
                .map(|(cn, c)| ConsumerImage {
                    name: cn.to_vec(),
                    seen_time: c.seen_time,
                    active_time: None,
                    pending: c.pel.iter().copied().collect(),
                })
                .collect(),
        })
        .collect();
    let nodes = s.nodes().map(|n| NodeImage {
        master_id: n.master_id,
        master_fields: n.master_fields.iter().map(|f| f.to_vec()).collect(),
        entries: n
            .entries
            .into_iter()
            .map(|(i, deleted, fields)| EntryImage {
                id: i,
                deleted,
                fields: fields
                    .iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect(),
            })
            .collect(),
    });
    write_stream(w, nodes, &meta, &groups)
}

/// Reads a stream object's body (types 15, 19, 21) into our representation.
pub fn read(r: &mut Reader<'_>, ty: RdbType) -> Result<Stream> {
    let img = read_stream(r, ty)?;
    let mut s = Stream::new();
    for n in &img.nodes {
        let master: Vec<&[u8]> = n.master_fields.iter().map(|f| &f[..]).collect();
        let entries: Vec<(StreamId, bool, Vec<&[u8]>)> = n
            .entries
            .iter()
            .map(|e| {
                let fv: Vec<&[u8]> = e
                    .fields
                    .iter()
                    .flat_map(|(f, v)| [&f[..], &v[..]])
                    .collect();
                (e.id, e.deleted, fv)
            })
            .collect();
        s.push_node(n.master_id, &master, &entries);
    }
    s.last_id = img.meta.last_id;
    s.first_id = img.meta.first_id;
    s.max_deleted_id = img.meta.max_deleted_id;
    s.entries_added = img.meta.entries_added;
    for g in img.groups {
        let mut pel = BTreeMap::new();
        for p in &g.pending {
            pel.insert(
                p.id,
                Nack {
                    delivery_time: p.delivery_time,
                    delivery_count: p.delivery_count,
                    consumer: Box::default(),
                },
            );
        }
        let mut consumers = BTreeMap::new();
        for c in g.consumers {
            let name: Box<[u8]> = c.name.into_boxed_slice();
            let mut own = BTreeSet::new();
            for i in c.pending {
                if let Some(n) = pel.get_mut(&i) {
                    n.consumer = name.clone();
                }
                own.insert(i);
            }
            consumers.insert(
                name,
                Consumer {
                    seen_time: c.seen_time,
                    pel: own,
                },
            );
        }
        s.groups.insert(
            g.name.into_boxed_slice(),
            Group {
                last_id: g.last_id,
                entries_read: g.entries_read,
                pel,
                consumers,
            },
        );
    }
    Ok(s)
}
