-- Version 16 (learned timing in the runtime, issue 20).
--
-- Each attempt an adaptive policy planned keeps its decision, written with the attempt in the
-- same statement (`recoup.dunning.attempt_timing`): the arm (adaptive, holdout, static), the
-- slot chosen and the static plan's slot (labels), the propensity, the explanation and its
-- figures (JSON). All NULL for an attempt of a static policy.
ALTER TABLE invoice_attempts ADD COLUMN timing_arm TEXT
    CHECK (timing_arm IS NULL OR timing_arm IN ('adaptive', 'holdout', 'static'));
ALTER TABLE invoice_attempts ADD COLUMN timing_slot TEXT;
ALTER TABLE invoice_attempts ADD COLUMN timing_static_slot TEXT;
ALTER TABLE invoice_attempts ADD COLUMN timing_propensity REAL
    CHECK (timing_propensity IS NULL OR (timing_propensity > 0 AND timing_propensity <= 1));
ALTER TABLE invoice_attempts ADD COLUMN timing_explanation TEXT;
-- A decision is written whole or not at all: the columns are all NULL or all set.
ALTER TABLE invoice_attempts ADD COLUMN timing_figures TEXT
    CHECK ((timing_arm IS NULL) = (timing_figures IS NULL)
           AND (timing_arm IS NULL) = (timing_slot IS NULL)
           AND (timing_arm IS NULL) = (timing_static_slot IS NULL)
           AND (timing_arm IS NULL) = (timing_propensity IS NULL)
           AND (timing_arm IS NULL) = (timing_explanation IS NULL));

-- The learner's reading of a tenant's answered attempts (`recovery.learning`), extended from
-- where it left off rather than read again from the start.
CREATE INDEX invoice_attempts_reported ON invoice_attempts (tenant, reported_at)
    WHERE reported_at IS NOT NULL;
