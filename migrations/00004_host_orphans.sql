-- +goose Up
-- Zonewright resources the host reconciler found on a node with no pod to
-- own them, keyed by what they are (zone/NAME, vnic/NAME, dataset/NAME),
-- with when it first saw each: it removes them once the grace period has
-- passed, and forgets those that stop being orphans.
CREATE TABLE host_orphans (
    node_name  text NOT NULL,
    key        text NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_name, key)
);

-- +goose Down
DROP TABLE host_orphans;
