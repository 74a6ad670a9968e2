//! The documents that describe this member: the replica-set fields of `hello`/`isMaster`
//! (mongod 7.0's shapes for an uninitiated, removed or primary member) and
//! `replSetGetStatus`. Built from one locked snapshot of the state, so each reply is
//! consistent.

use super::{no_replication, not_initialized, MemberState, Repl};
use bson::{doc, oid::ObjectId, Document};
use shale_doc::{ErrorCode, MongoError};

/// mongod's `electionId` for a term (`OID::fromTerm`): the largest timestamp, then the term.
pub fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

impl Repl {
    /// The replica-set fields of `hello` (`is_master`: the legacy `ismaster` spelling) in
    /// mongod's order; `None` on a standalone (its reply is the standalone one).
    pub fn hello_fields(&self, is_master: bool) -> Option<Document> {
        self.set_name.as_ref()?;
        let g = self.lock();
        let primary_key = if is_master {
            "ismaster"
        } else {
            "isWritablePrimary"
        };
        let mut d = doc! {"topologyVersion": self.topology_version(g.counter)};
        let (Some(config), MemberState::Primary) = (&g.config, g.state) else {
            d.insert(primary_key, false);
            d.insert("secondary", false);
            d.insert("info", "Does not have a valid replica set config");
            d.insert("isreplicaset", true);
            return Some(d);
        };
        let me =
            g.me.as_ref()
                .and_then(|m| config.self_member(m))
                .and_then(|m| m.get_str("host").ok())
                .unwrap_or_default()
                .to_owned();
        d.insert("hosts", config.hosts());
        d.insert("setName", config.set_name());
        d.insert("setVersion", config.version() as i32);
        d.insert(primary_key, true);
        d.insert("secondary", false);
        d.insert("primary", me.clone());
        d.insert("me", me);
        d.insert("electionId", election_id(g.term));
        if let Some(w) = self.last_write(&g) {
            d.insert(
                "lastWrite",
                doc! {
                    "opTime": w.document(),
                    "lastWriteDate": w.wall,
                    "majorityOpTime": w.document(),
                    "majorityWriteDate": w.wall,
                },
            );
        }
        Some(d)
    }

    /// `replSetGetStatus`: the set, this member (the only one) and its optimes.
    pub fn status_document(&self) -> Result<Document, MongoError> {
        let Some(set_name) = &self.set_name else {
            return Err(no_replication());
        };
        let g = self.lock();
        let Some(config) = &g.config else {
            return Err(not_initialized());
        };
        if g.state == MemberState::Removed {
            return Err(MongoError::new(
                ErrorCode::InvalidReplicaSetConfig,
                "Our replica set config is invalid or we are not a member of it",
            ));
        }
        let (Some(last), Some(elected)) = (self.last_write(&g), g.elected) else {
            return Err(not_initialized());
        };
        let me = g.me.as_ref().and_then(|m| config.self_member(m));
        let member_id = me.and_then(|m| m.get_i32("_id").ok()).unwrap_or(0);
        let host = me.and_then(|m| m.get_str("host").ok()).unwrap_or_default();
        let optime = last.document();
        let member = doc! {
            "_id": member_id,
            "name": host,
            "health": 1.0,
            "state": 1,
            "stateStr": "PRIMARY",
            "uptime": self.started.elapsed().as_secs() as i64,
            "optime": optime.clone(),
            "optimeDate": last.wall,
            "lastAppliedWallTime": last.wall,
            "lastDurableWallTime": last.wall,
            "syncSourceHost": "",
            "syncSourceId": -1,
            "infoMessage": "",
            "electionTime": elected.ts,
            "electionDate": elected.wall,
            "configVersion": config.version() as i32,
            "configTerm": config.term(),
            "self": true,
            "lastHeartbeatMessage": "",
        };
        Ok(doc! {
            "set": set_name.clone(),
            "date": bson::DateTime::now(),
            "myState": 1,
            "term": g.term,
            "syncSourceHost": "",
            "syncSourceId": -1,
            "heartbeatIntervalMillis": 2000i64,
            "majorityVoteCount": 1,
            "writeMajorityCount": 1,
            "votingMembersCount": 1,
            "writableVotingMembersCount": 1,
            "optimes": {
                "lastCommittedOpTime": optime.clone(),
                "lastCommittedWallTime": last.wall,
                "readConcernMajorityOpTime": optime.clone(),
                "appliedOpTime": optime.clone(),
                "durableOpTime": optime,
                "lastAppliedWallTime": last.wall,
                "lastDurableWallTime": last.wall,
            },
            "members": [member],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_ids_order_by_term_after_any_real_object_id() {
        let a = election_id(1);
        let b = election_id(2);
        assert!(a < b);
        assert_eq!(a.to_hex(), "7fffffff0000000000000001");
    }
}
