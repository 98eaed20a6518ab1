"""Flow control: rate and concurrency limiters, taken as a batch's permits."""
