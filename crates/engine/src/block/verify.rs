//! `BlockFile::verify`: the consistency check of a block file against the invariants of
//! `mod.rs`. It owns no state; it reads the maps, the free list and the file, and reports
//! the first violation as `Error::Corruption`. Meant for tests and `validate`-style tools:
//! run it while no write is in flight for a precise leak check.

use super::allocator::{alloc_len, DATA_START};
use super::header::{slot_of, slot_offset, Header, SLOT_SIZE};
use super::{btt, BlockFile};
use crate::{Error, Location, Result};
use shale_io::Category;

/// One referenced extent: where, how many bytes of file, and what references it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Used {
    offset: u64,
    size: u64,
    owner: Owner,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    /// A block of a node; the same (node, extent) may appear in D, C and L.
    Node(u64, u32, u32),
    /// A serialized BTT, named.
    Table(&'static str),
}

impl BlockFile {
    /// Checks that no two extents of D ∪ C ∪ L (and the serialized BTTs) overlap unless they
    /// are the same extent (B1, B2); that the free list is within the data area, disjoint from
    /// itself and from every referenced extent, and that referenced + free + in-flight bytes
    /// account for the whole data area (no leak); that every block of L reads back with its
    /// crc; that both header slots parse and the durable one matches D (B4, B9). Returns the
    /// first violation as `Error::Corruption`.
    pub fn verify(&self) -> Result<()> {
        let (live, durable_seq, durable_btt) = {
            let st = self.state.lock();
            let end = st.alloc.end();
            let mut used = Vec::new();
            let maps = [
                Some(&st.durable),
                st.ckpt.as_ref().map(|c| &c.map),
                Some(&st.live),
            ];
            for map in maps.into_iter().flatten() {
                for (id, e) in map {
                    used.push(Used {
                        offset: e.offset,
                        size: alloc_len(u64::from(e.len)),
                        owner: Owner::Node(id.0, e.len, e.crc),
                    });
                }
            }
            let (o, l) = st.durable_btt;
            used.push(Used {
                offset: o,
                size: l,
                owner: Owner::Table("durable BTT"),
            });
            if let Some((o, l)) = st.ckpt.as_ref().and_then(|c| c.ending) {
                used.push(Used {
                    offset: o,
                    size: l,
                    owner: Owner::Table("checkpoint BTT"),
                });
            }
            used.sort();
            used.dedup();
            let mut used_bytes = 0u64;
            for pair in used.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if a.offset + a.size > b.offset {
                    return Err(self.bad(format!("referenced extents overlap: {a:?} and {b:?}")));
                }
            }
            for u in &used {
                used_bytes += u.size;
                if u.offset < DATA_START || u.offset + u.size > end {
                    return Err(self.bad(format!("{u:?} is outside the data area ..{end}")));
                }
            }
            let mut free_bytes = 0u64;
            let mut prev_end = DATA_START;
            let mut refs = used.iter().peekable();
            for (off, len) in st.alloc.extents() {
                if off < prev_end || len == 0 || off + len > end {
                    return Err(self.bad(format!(
                        "free extent {off}+{len} overlaps another or leaves the data area ..{end}"
                    )));
                }
                prev_end = off + len;
                free_bytes += len;
                // Skip referenced extents wholly before this free one, then test overlap.
                while refs.peek().is_some_and(|u| u.offset + u.size <= off) {
                    refs.next();
                }
                if let Some(u) = refs.peek().filter(|u| u.offset < off + len) {
                    return Err(
                        self.bad(format!("free extent {off}+{len} overlaps referenced {u:?}"))
                    );
                }
            }
            if free_bytes != st.alloc.free_bytes() {
                return Err(self.bad(format!(
                    "free list holds {free_bytes} bytes but counts {}",
                    st.alloc.free_bytes()
                )));
            }
            let accounted = used_bytes + free_bytes + st.in_flight;
            if accounted != end - DATA_START {
                return Err(self.bad(format!(
                    "data area of {} bytes but {used_bytes} referenced + {free_bytes} free + {} in flight",
                    end - DATA_START,
                    st.in_flight
                )));
            }
            (st.live.clone(), st.durable_seq, st.durable_btt)
        };
        for (&id, &e) in &live {
            self.read_checked(id, e, Category::Meta)?;
        }
        self.verify_headers(durable_seq, durable_btt.0)
    }

    /// Both slots parse; the durable checkpoint's slot names `btt_offset`, and the table
    /// there decodes to what D held when it became durable (D never changes while durable).
    fn verify_headers(&self, durable_seq: u64, btt_offset: u64) -> Result<()> {
        let mut durable = None;
        for slot in 0..2u8 {
            let page = self
                .file
                .read_exact_at(slot_offset(slot), SLOT_SIZE, Category::Meta)?;
            let h = Header::decode(&page, slot).map_err(|reason| {
                Error::corruption(&self.path, Location::Header { slot }, reason)
            })?;
            if h.seq == durable_seq {
                durable = Some(h);
            }
        }
        let h = durable.ok_or_else(|| {
            let slot = slot_of(durable_seq);
            Error::corruption(
                &self.path,
                Location::Header { slot },
                format!("durable checkpoint {durable_seq} is not in its slot"),
            )
        })?;
        let loc = Location::TranslationTable {
            offset: h.btt_offset,
        };
        if h.btt_offset != btt_offset {
            return Err(Error::corruption(
                &self.path,
                loc,
                format!(
                    "header names the BTT at {} but D's is at {btt_offset}",
                    h.btt_offset
                ),
            ));
        }
        let raw = self.file.read_exact_at(
            h.btt_offset,
            usize::try_from(h.btt_len).unwrap_or(usize::MAX),
            Category::Meta,
        )?;
        if crc32c::crc32c(&raw) != h.btt_crc {
            return Err(Error::corruption(&self.path, loc, "checksum mismatch"));
        }
        let on_disk =
            btt::decode(&raw).map_err(|r| Error::corruption(&self.path, loc.clone(), r))?;
        let st = self.state.lock();
        if st.durable_seq == durable_seq && on_disk != st.durable {
            return Err(Error::corruption(
                &self.path,
                loc,
                "durable BTT on disk differs from D in memory",
            ));
        }
        Ok(())
    }

    fn bad(&self, reason: String) -> Error {
        Error::corruption(
            &self.path,
            Location::Other("block file extent map".into()),
            reason,
        )
    }
}
