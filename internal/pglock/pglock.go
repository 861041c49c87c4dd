// Package pglock lists the PostgreSQL advisory lock keys zonewright takes,
// in one place so that no two uses share a key. A shared key makes
// unrelated work wait on each other; when one process holds it on one
// connection and waits for another of its connections, that is a
// deadlock PostgreSQL cannot see (it lasts until a context deadline).
// IPAM takes one more per node, hashtext('ipam/<node>'), outside this
// list. Locks of the two-key form (class, key) are a key space apart;
// their classes are here too.
package pglock

const (
	// Change orders the store's change feed: writers hold it shared (a
	// transaction lock) from taking a resource version to commit; the
	// feed and lists take it exclusively for a moment to learn which
	// versions are settled (internal/store/order.go).
	Change int64 = 0x7a77_0001
	// Scheduling serialises placements across control-plane replicas (a
	// session lock held while a pod is placed and bound).
	Scheduling int64 = 0x7a77_0002
	// EndpointsLeader elects the one endpoints controller that writes (a
	// session lock).
	EndpointsLeader int64 = 0x7a77_0003
	// ClusterIP serialises ClusterIP allocation (a transaction lock, taken
	// inside a write's checks: before Change).
	ClusterIP int64 = 0x7a77_0004
	// WorkloadFeedLeader elects the one workload feed that wakes
	// deployments' and jobs' workflows (a session lock).
	WorkloadFeedLeader int64 = 0x7a77_0006
	// PodImages serialises adding images made for pods to the catalog (a
	// transaction lock, taken inside a write's checks: before Change), so
	// that two creates cannot both pass the cap's last place.
	PodImages int64 = 0x7a77_0008
	// RoomFeedLeader elects the one room feed that wakes pods waiting for
	// room (a session lock).
	RoomFeedLeader int64 = 0x7a77_0009
	// PodCIDR serialises giving nodes their pod CIDRs (a transaction
	// lock), so that nodes joining at once do not all race for the same
	// lowest free block.
	PodCIDR int64 = 0x7a77_000a
)

// Sync is the class of the locks that let one sync of a workload run at
// a time (store.Exclusive, with the key "<kind>/<namespace>/<name>"): a
// retried attempt of a deployment's or a job's sync may start while the
// first, alive but past its heartbeat timeout, still runs, and each
// would create the pods it finds missing.
const Sync int32 = 0x7a77_0007

// All is every key, for the test that keeps them distinct.
var All = []int64{Change, Scheduling, EndpointsLeader, ClusterIP, WorkloadFeedLeader, PodImages, RoomFeedLeader, PodCIDR}
