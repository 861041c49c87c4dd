-- +goose Up
-- Which pods use an image (asked by every image deletion) is an index
-- lookup: the expression is the one store.podsUsingImageSQL tests.
CREATE INDEX pods_containers ON pods USING gin ((spec -> 'containers') jsonb_path_ops);

-- +goose Down
DROP INDEX pods_containers;
