-- Tables that only grow are pruned by the tick: a hook delivery is kept a day (its signature is refused
-- after five minutes anyway), a refused summons thirty days.
CREATE INDEX hook_deliveries_received ON hook_deliveries (received_at);
