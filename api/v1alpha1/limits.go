package v1alpha1

// Bounds admission enforces on counts (the CRD's Maximum markers of both versions carry
// the same literals).
//
// MaxReplicas bounds a service's replicas. 10,000 replicas are two thirds of the pods
// Kubernetes is tested to run per cluster (150,000, its scalability thresholds) for
// one service of one DGD, so no cluster can schedule a larger one; and a bound is
// needed by the names the operator writes: a LeaderWorkerSet's group index becomes part
// of its worker StatefulSet's name and of that StatefulSet's controller-revision-hash
// label (`<lws>-<index>-<hash>`, at most 63 characters), so the width of the largest
// index (4 digits up to 9,999) decides how long a LeaderWorkerSet's name may be
// (backends.MaxGangNameLength).
const MaxReplicas = 10000

// MaxNodeCount bounds multinode.nodeCount, the pods of one gang. A gang is placed
// whole, and 1,024 GPU nodes in one gang is well past the largest NVLink domain
// (GB200 NVL72: 18 nodes) and any model Dynamo's recipes run multinode (16 nodes).
// It also bounds what the operator builds per pass (a TRT-LLM leader's host list of
// nodeCount entries, in its command line and so in the LeaderWorkerSet or
// PodCliqueSet): with nodeCount 100,000 the API server refused the LeaderWorkerSet as
// "Request entity too large"; at 1,024 the list is some 100 KB, within the 1.5 MB an
// object may have.
const MaxNodeCount = 1024
