package sqlite

import "testing"

// milestone is keep_milestones' definition, walked: the first and the
// last positions, and 1 + round(i*(total-1)/(n+1)) for i from 1 to n.
func TestMilestoneIsTheDefinition(t *testing.T) {
	t.Parallel()
	for total := int64(1); total <= 70; total++ {
		for n := int64(0); n <= 90; n++ {
			marks := map[int64]bool{1: true, total: true}
			for i := int64(1); i <= n; i++ {
				marks[1+(2*i*(total-1)+n+1)/(2*(n+1))] = true
			}
			for pos := int64(1); pos <= total; pos++ {
				if got := milestone(pos, total, n); got != marks[pos] {
					t.Fatalf("milestone(%d, %d, %d) = %v, want %v", pos, total, n, got, marks[pos])
				}
			}
		}
	}
	if !milestone(2, 3, 1<<31-1) || milestone(50, 1000, 3) {
		t.Fatal("milestone far from the walked ones")
	}
}
