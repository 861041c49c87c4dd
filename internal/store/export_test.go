package store

// PodsUsingImageSQL is the query PodsUsingImage runs, for EXPLAIN.
const PodsUsingImageSQL = podsUsingImageSQL
