-- Reserved for a migration of another branch; replaced by it at merge.
SELECT 1;
