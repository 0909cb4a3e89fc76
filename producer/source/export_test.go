package source

import "context"

// What the package's own tests (package source_test) reach that no
// program needs.

// ShardMemory arranges pieces in bytes of memory and no disk (0: read
// every sample alone).
func (s *Shards) ShardMemory(bytes int64) { s.Arrange(ShardSpace{Memory: bytes}) }

// ScanFolder lists root as Open does, with no cache, for the tests that
// ask what only a folder answers.
func ScanFolder(root string) (*Folder, error) {
	return scanFolder(context.Background(), root, Options{})
}
