"""The SQL stores' tables and statements, shared by SQLite and PostgreSQL, and what a chat's version means.

`agency_swarm_items(chat_id, thread_key, seq, item, version)` holds the items: `version` numbers the chat's items
1, 2, 3... in the order they were stored, and `seq = version - 1` orders each thread. `agency_swarm_chats(chat_id,
version, cleared)` holds, per chat, the version of its newest item and the version at which it was last deleted.
An append raises `version` in the same transaction that stores its items, under the chat row's lock, so versions
are given out in commit order and a reader that saw version v has seen every item up to v. Rows written before
versions existed (their `seq` counted per thread) have none and are read by full loads only; the migration starts
those chats' versions past their largest `seq`, so new items still sort after them. Upgrade every process that
writes to one database together.
"""

from __future__ import annotations

ITEMS = "agency_swarm_items"
CHATS = "agency_swarm_chats"

CREATE_ITEMS = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_items (chat_id TEXT NOT NULL, thread_key TEXT NOT NULL, "
    "seq {int} NOT NULL, item TEXT NOT NULL, version {int}, PRIMARY KEY (chat_id, thread_key, seq))"
)
ADD_VERSION_COLUMN = "ALTER TABLE agency_swarm_items ADD COLUMN version {int}"
CREATE_VERSION_INDEX = (
    "CREATE INDEX IF NOT EXISTS agency_swarm_items_by_version ON agency_swarm_items (chat_id, version)"
)
CREATE_CHATS = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_chats (chat_id TEXT PRIMARY KEY, version {int} NOT NULL, "
    "cleared {int} NOT NULL)"
)

VERSION_EXISTING_CHATS = (
    "INSERT INTO agency_swarm_chats (chat_id, version, cleared) "
    "SELECT chat_id, MAX(seq) + 1, 0 FROM agency_swarm_items GROUP BY chat_id"
)
LOAD = "SELECT thread_key, item FROM agency_swarm_items WHERE chat_id = {0} ORDER BY thread_key, seq"
LOAD_AFTER = (
    "SELECT thread_key, item FROM agency_swarm_items WHERE chat_id = {0} AND version > {1} ORDER BY version"
)
LIST = "SELECT DISTINCT chat_id FROM agency_swarm_items ORDER BY chat_id"
VERSION = "SELECT version, cleared FROM agency_swarm_chats WHERE chat_id = {0}"
DELETE_ITEMS = "DELETE FROM agency_swarm_items WHERE chat_id = {0}"
# A delete is a change too: it raises the version, and `cleared` tells holders to read the chat anew.
CLEAR_CHAT = "UPDATE agency_swarm_chats SET version = version + 1, cleared = version + 1 WHERE chat_id = {0}"

# Attachment bytes: once per database, by sha256 digest, with how many chats hold each (`holders`); which chats
# hold which digests. A blob is written (or its count raised) before any item referring to it is appended; a delete
# lowers the counts of the chat's blobs and deletes those that reach 0, by a row-local condition, so a chat putting
# the same blob at the same moment either keeps the row alive or writes it anew.
BLOBS = "agency_swarm_blobs"
BLOB_HOLDERS = "agency_swarm_blob_holders"
CREATE_BLOBS = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_blobs (digest TEXT PRIMARY KEY, data {blob} NOT NULL, "
    "holders {int} NOT NULL)"
)
CREATE_BLOB_HOLDERS = (
    "CREATE TABLE IF NOT EXISTS agency_swarm_blob_holders (chat_id TEXT NOT NULL, digest TEXT NOT NULL, "
    "PRIMARY KEY (chat_id, digest))"
)
LOAD_BLOBS = (
    "SELECT b.digest, b.data FROM agency_swarm_blob_holders h JOIN agency_swarm_blobs b ON b.digest = h.digest "
    "WHERE h.chat_id = {0} AND h.digest = {1}"
)
DROP_UNHELD_BLOBS = "DELETE FROM agency_swarm_blobs WHERE digest = {0} AND holders <= 0"
