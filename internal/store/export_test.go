package store

// PodsUsingImageSQL is the query PodsUsingImage runs, for EXPLAIN.
const PodsUsingImageSQL = podsUsingImageSQL

// FeedCatchUps is how many times the feed has read up to a settled
// version.
func (s *Store) FeedCatchUps() int64 { return s.feed.catchUps.Load() }

// SettledReads is how many reads have taken the barrier (readSettled).
func (s *Store) SettledReads() int64 { return s.settledReads.Load() }
