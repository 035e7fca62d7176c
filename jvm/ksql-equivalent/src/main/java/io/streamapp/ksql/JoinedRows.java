package io.streamapp.ksql;

/** The two rows a join result holds, before the WHERE and the projection (either may be null in an outer join). */
record JoinedRows(Row left, Row right) { }
