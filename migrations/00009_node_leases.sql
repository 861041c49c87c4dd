-- +goose Up
-- Node liveness: one small row per node, renewed by its agent every
-- heartbeat interval. It is outside the change feed (no changes row, no
-- NOTIFY): a heartbeat is one UPDATE of this row and nothing else.
-- renew_time is the database's clock at the renewal, so node health is
-- not misled by a node's clock.
CREATE TABLE node_leases (
    node_name              text PRIMARY KEY,
    holder_identity        text NOT NULL DEFAULT '',
    lease_duration_seconds integer NOT NULL,
    acquire_time           timestamptz NOT NULL DEFAULT now(),
    renew_time             timestamptz NOT NULL DEFAULT now(),
    lease_transitions      integer NOT NULL DEFAULT 0
);

-- Each node's pod CIDR, assigned by the control plane and kept for the
-- node's life. The exclusion constraint makes overlapping ranges
-- impossible, whichever replica allocates.
CREATE TABLE node_pod_cidrs (
    node_name text PRIMARY KEY,
    cidr      cidr NOT NULL,
    EXCLUDE USING gist (cidr inet_ops WITH &&)
);

-- +goose Down
DROP TABLE node_pod_cidrs;
DROP TABLE node_leases;
